"""The planner's wire types: the GPUPartitionPlan spec and status, NodePartition, the
inventory it plans from, their CRD schemas and the reference page made from them."""
