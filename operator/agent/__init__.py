"""The node agent: makes each GPU's MIG instances match its NodePartition, safely."""

IDLE_INTERVAL_S = 30.0
"""Seconds between the agent's passes while its NodePartition stays unchanged (it watches the
NodePartition in between): `migplan agent --interval`'s default, and the pace the operator
bench's simulated agents keep outside a rollout."""
