"""tests/cluster helpers (nodes.py) are imported by name; fixtures shared by the cluster tests."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def crds(control_plane):
    """The control plane with migplan's CRDs installed and established."""
    control_plane.kubectl("apply", "-k", str(ROOT / "crds"))
    control_plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/gpupartitionplans.migplan.io",
        "crd/nodepartitions.migplan.io",
    )
    return control_plane


@pytest.fixture(scope="session")
def operator_kubeconfig(crds):
    """A kubeconfig for the operator's ServiceAccount with the RBAC deploy/ ships, so
    end-to-end tests run the operator with exactly those permissions."""
    from operator_proc import operator_service_account

    return operator_service_account(crds)
