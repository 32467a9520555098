"""Fixtures shared by every test package."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from migplan.planner.hardware.catalog import Catalog, default_catalog

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
    from migplan.planner.api.inventory import GpuState
    from migplan.planner.hardware.layout import Instance, Layout

    def make(
        model: str,
        layout: str = "-",
        *,
        node: str = "node-1",
        index: int = 0,
        pins: dict[str, str] | None = None,
        mig_enabled: bool = True,
        whole_gpu_pod: str | None = None,
        sharers: dict[str, tuple[str, ...]] | None = None,
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
            sharers={Instance.parse(k): v for k, v in (sharers or {}).items()},
        )

    return make


@pytest.fixture(scope="session")
def want():
    """Build demand items: want("1g.10gb", 3), want("3g.40gb", 1, kind="total", priority=5),
    want("2g.20gb", 1, alternatives=("3g.40gb",)) for either/or demand."""
    from migplan.planner.demand import DemandItem, DemandKind

    def make(
        profile: str,
        count: int,
        *,
        kind: str = "free",
        priority: int = 1,
        alternatives: tuple[str, ...] = (),
    ) -> DemandItem:
        return DemandItem(profile, count, priority, DemandKind(kind), alternatives=alternatives)

    return make


@pytest.fixture
def bundle():
    """Build bundle items (pods needing several instances on one node):
    bundle(2, {"1g.10gb": 2}) is two pods of 2 x 1g.10gb each; a part's key may be a tuple of
    profiles any of which serves: bundle(1, {("1g.10gb", "2g.20gb"): 1, "3g.40gb": 1})."""
    from migplan.planner.demand import DemandItem, DemandKind, Part

    def make(pods: int, parts: dict, *, priority: int = 1) -> DemandItem:
        per_pod = tuple(
            sorted(Part((k,) if isinstance(k, str) else tuple(k), n) for k, n in parts.items())
        )
        first = per_pod[0].profiles[0]
        return DemandItem(first, pods, priority, DemandKind.FREE, per_pod=per_pod)

    return make


def _load_harness():
    import importlib.util
    import sys
    from pathlib import Path

    if "migplan_test_harness" in sys.modules:
        return sys.modules["migplan_test_harness"]
    path = Path(__file__).parent / "cluster" / "harness.py"
    spec = importlib.util.spec_from_file_location("migplan_test_harness", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def control_plane():
    """A real control plane for the whole test session (built and cached by build.sh).

    A control plane that cannot be built or started fails the tests that need it, with the
    reason; it is never skipped.
    """
    harness = _load_harness()
    with harness.ControlPlane.up() as plane:
        yield plane
