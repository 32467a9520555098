"""tests/cluster helpers (nodes.py) are imported by name; fixtures shared by the cluster tests."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def crds(control_plane):
    """The control plane with migplan's CRDs installed and established."""
    from operator_proc import install_crds

    return install_crds(control_plane)


@pytest.fixture(scope="session")
def operator_kubeconfig(crds):
    """A kubeconfig for the operator's ServiceAccount with the RBAC deploy/ ships, so
    end-to-end tests run the operator with exactly those permissions."""
    from operator_proc import operator_service_account

    return operator_service_account(crds)
