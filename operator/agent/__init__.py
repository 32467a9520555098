"""The node agent: makes each GPU's MIG instances match its NodePartition, safely."""
