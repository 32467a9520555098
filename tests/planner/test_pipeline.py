"""The planning pass as the CLI and the operator run it."""

from __future__ import annotations

import time
from pathlib import Path

from migplan.operator.cli.files import load_inventory, load_plan_manifest
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.pipeline import plan_fleet

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_is_named_and_its_time_is_the_planning_alone() -> None:
    manifest = load_plan_manifest(ROOT / "examples" / "plan.yaml")
    inventory = load_inventory(ROOT / "examples" / "cluster.yaml")
    began = time.monotonic() - 30  # the command began long ago (imports, reading files)
    outcome = plan_fleet(manifest, inventory, default_catalog(), started=began)
    assert outcome.plan.name == "shared-pool"
    assert outcome.plan.solver.wall_seconds < 10  # the pass, not the 30 s before it
