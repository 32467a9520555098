"""Fixtures shared by every test package."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from migplan.planner.catalog import Catalog, default_catalog

# Deterministic property tests: the same examples on every run and in CI.
settings.register_profile(
    "migplan", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("migplan")


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    """The shipped GPU catalog."""
    return default_catalog()


@pytest.fixture(scope="session")
def gpu(catalog):
    """Build a GpuState: gpu("H100-80GB", "3g.40gb@0", pins={"3g.40gb@0": "ns/pod"})."""
    from migplan.planner.inventory import GpuState
    from migplan.planner.layout import Instance, Layout

    def make(
        model: str,
        layout: str = "-",
        *,
        node: str = "node-1",
        index: int = 0,
        pins: dict[str, str] | None = None,
        mig_enabled: bool = True,
        whole_gpu_pod: str | None = None,
    ) -> GpuState:
        return GpuState(
            node=node,
            index=index,
            uuid=None,
            model=catalog.model(model),
            layout=Layout.parse(layout),
            pins={Instance.parse(k): v for k, v in (pins or {}).items()},
            mig_enabled=mig_enabled,
            whole_gpu_pod=whole_gpu_pod,
        )

    return make


@pytest.fixture(scope="session")
def want():
    """Build demand items: want("1g.10gb", 3), want("3g.40gb", 1, kind="total", priority=5)."""
    from migplan.planner.demand import DemandItem, DemandKind

    def make(profile: str, count: int, *, kind: str = "free", priority: int = 1) -> DemandItem:
        return DemandItem(profile, count, priority, DemandKind(kind))

    return make
