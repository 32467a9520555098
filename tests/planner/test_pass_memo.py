"""A pass whose inputs are the last pass's takes its plan where that plan is proven best and
still the one waiting; any other pass solves (`planner/pass_memo.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from migplan.operator.cli.files import load_inventory, load_plan_manifest
from migplan.planner import pipeline
from migplan.planner.api.inventory import Inventory
from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.assemble import GpuKey, input_hash
from migplan.planner.hardware.catalog import Catalog, default_catalog
from migplan.planner.pass_memo import PassMemo
from migplan.planner.pipeline import PlanOutcome, covered, plan_fleet
from migplan.planner.plan import Plan, SolveStatus
from migplan.planner.validate import InvalidPlanError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def inputs(folder: Path = EXAMPLES) -> tuple[GPUPartitionPlan, Inventory]:
    """The example's plan and cluster, read afresh (new objects, as after a changed report)."""
    return load_plan_manifest(folder / "plan.yaml"), load_inventory(folder / "cluster.yaml")


def waiting(plan: Plan) -> dict[GpuKey, str]:
    """The waiting plan's layouts as the operator reads them back from its status."""
    return {(g.node, g.gpu): g.after for g in plan.gpus if g.operations}


class Solves:
    """The planner's solve, counted (and, with `status`, its plan's status replaced)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, status: SolveStatus | None = None):
        self.count = 0
        real: Callable[..., Plan] = pipeline.solve

        def counted(*args: Any, **kwargs: Any) -> Plan:
            self.count += 1
            plan = real(*args, **kwargs)
            if status is None:
                return plan
            solver = plan.solver.model_copy(update={"status": status})
            return plan.model_copy(update={"solver": solver})

        monkeypatch.setattr(pipeline, "solve", counted)


def first_pass(memo: PassMemo, catalog: Catalog, folder: Path = EXAMPLES) -> PlanOutcome:
    manifest, inventory = inputs(folder)
    outcome = plan_fleet(manifest, inventory, catalog, memo=memo)
    assert not outcome.kept
    return outcome


def test_the_same_inputs_take_the_last_plan_without_solving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog, memo = default_catalog(), PassMemo()
    first = first_pass(memo, catalog)
    assert first.plan.solver.status is SolveStatus.OPTIMAL
    assert waiting(first.plan)  # the plan changes GPUs: the check below is not vacuous
    solves = Solves(monkeypatch)
    manifest, inventory = inputs()
    again = plan_fleet(manifest, inventory, catalog, memo=memo, previous=waiting(first.plan))
    assert again.kept
    assert solves.count == 0
    assert again.plan == first.plan
    assert {g.node for g in again.gpus} == {g.node for g in first.gpus}


def test_changed_inputs_are_solved(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, memo = default_catalog(), PassMemo()
    first = first_pass(memo, catalog)
    solves = Solves(monkeypatch)
    manifest, inventory = inputs()
    node = inventory.nodes[0]
    relabelled = node.model_copy(update={"labels": {**node.labels, "zone": "b"}})
    inventory = inventory.model_copy(update={"nodes": (relabelled, *inventory.nodes[1:])})
    again = plan_fleet(manifest, inventory, catalog, memo=memo, previous=waiting(first.plan))
    assert not again.kept
    assert solves.count == 1
    assert again.plan.input_hash != first.plan.input_hash


def test_a_plan_cut_short_is_solved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, memo = default_catalog(), PassMemo()
    Solves(monkeypatch, status=SolveStatus.FEASIBLE)
    first = first_pass(memo, catalog)
    solves = Solves(monkeypatch)
    manifest, inventory = inputs()
    again = plan_fleet(manifest, inventory, catalog, memo=memo, previous=waiting(first.plan))
    assert not again.kept
    assert solves.count == 1


def test_another_waiting_plan_or_another_catalog_is_solved_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog, memo = default_catalog(), PassMemo()
    first = first_pass(memo, catalog)
    solves = Solves(monkeypatch)
    (node, gpu), layout = next(iter(waiting(first.plan).items()))
    other = {**waiting(first.plan), (node, gpu): "-" if layout != "-" else "7g.80gb@0"}
    manifest, inventory = inputs()
    assert not plan_fleet(manifest, inventory, catalog, memo=memo, previous=other).kept
    assert solves.count == 1
    manifest, inventory = inputs()
    again = plan_fleet(manifest, inventory, Catalog(catalog), memo=memo)
    assert not again.kept
    assert solves.count == 2


def test_a_kept_plan_is_validated_against_this_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, memo = default_catalog(), PassMemo()
    first = first_pass(memo, catalog)
    manifest, inventory = inputs()
    digest = input_hash(manifest.spec, covered(inventory, manifest))
    broken = first.plan.model_copy(update={"gpus": first.plan.gpus[:-1]})
    memo.remember(digest=digest, catalog=catalog, plan=broken)
    Solves(monkeypatch)
    with pytest.raises(InvalidPlanError):
        plan_fleet(manifest, inventory, catalog, memo=memo)


def test_a_kept_plan_with_new_nodes_takes_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog, memo = default_catalog(), PassMemo()
    first = first_pass(memo, catalog, EXAMPLES / "scale-out")
    assert first.plan.scale_out is not None
    assert first.plan.scale_out.nodes
    solves = Solves(monkeypatch)
    manifest, inventory = inputs(EXAMPLES / "scale-out")
    again = plan_fleet(manifest, inventory, catalog, memo=memo, previous=waiting(first.plan))
    assert again.kept
    assert solves.count == 0
    assert again.plan.scale_out == first.plan.scale_out


def test_new_nodes_not_proven_are_solved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    real = pipeline._scale_out

    def cut_short(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **kwargs).model_copy(update={"status": "FEASIBLE"})

    catalog, memo = default_catalog(), PassMemo()
    monkeypatch.setattr(pipeline, "_scale_out", cut_short)
    first = first_pass(memo, catalog, EXAMPLES / "scale-out")
    assert first.plan.solver.status is SolveStatus.OPTIMAL
    solves = Solves(monkeypatch)
    manifest, inventory = inputs(EXAMPLES / "scale-out")
    again = plan_fleet(manifest, inventory, catalog, memo=memo, previous=waiting(first.plan))
    assert not again.kept
    assert solves.count == 1
