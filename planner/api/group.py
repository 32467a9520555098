"""migplan's API group: the one place its name, version and resource names are spelled."""

from __future__ import annotations

from typing import Final, Literal

ApiVersion = Literal["migplan.io/v1alpha1"]
"""The apiVersion of migplan's objects, as a type (pydantic checks it on every read)."""
API_VERSION: Final[ApiVersion] = "migplan.io/v1alpha1"  # mypy holds it to ApiVersion
GROUP, VERSION = API_VERSION.split("/")
PLAN_KIND: Final = "GPUPartitionPlan"
PLANS: Final = "gpupartitionplans"
NODE_PARTITION_KIND: Final = "NodePartition"
NODE_PARTITIONS: Final = "nodepartitions"
