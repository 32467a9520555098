"""The operator (kopf): turns GPUPartitionPlans into plans, and later into rollouts."""
