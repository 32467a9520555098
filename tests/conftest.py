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
