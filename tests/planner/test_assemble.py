"""The digest that names a plan's inputs (`input_hash`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel

from migplan.operator.cli.files import load_inventory, load_plan_manifest
from migplan.planner.api.inventory import Inventory, ResolvedNodes, resolve_inventory
from migplan.planner.api.spec import PlanSpec
from migplan.planner.assemble import input_hash

ROOT = Path(__file__).resolve().parents[2]


def _inputs() -> tuple[PlanSpec, Inventory]:
    spec = load_plan_manifest(ROOT / "examples" / "plan.yaml").spec
    inventory = load_inventory(ROOT / "examples" / "cluster.yaml")
    return spec, inventory


def test_the_same_inputs_read_twice_give_the_same_digest() -> None:
    first, second = _inputs(), _inputs()
    assert first[1] is not second[1]
    assert input_hash(*first) == input_hash(*second)
    assert input_hash(*first).startswith("sha256:")
    assert len(input_hash(*first)) == len("sha256:") + 64


def test_any_change_to_an_input_changes_the_digest() -> None:
    spec, inventory = _inputs()
    node = inventory.nodes[0]
    gpu = node.gpus[0].model_copy(update={"in_use": {}})
    freed = inventory.model_copy(update={"nodes": (node.model_copy(update={"gpus": (gpu,)}),)})
    relabelled = inventory.model_copy(
        update={"nodes": (node.model_copy(update={"labels": {"team": "x"}}), *inventory.nodes[1:])}
    )
    longer = spec.model_copy(update={"solver": spec.solver.model_copy(update={"workers": 2})})
    digests = {
        input_hash(spec, inventory),
        input_hash(spec, freed),
        input_hash(spec, relabelled),
        input_hash(longer, inventory),
    }
    assert len(digests) == 4


def test_parts_do_not_run_together() -> None:
    spec, inventory = _inputs()
    nodes = list(inventory.nodes)
    digests = {
        input_hash(spec, inventory),
        input_hash(inventory, spec),
        input_hash(spec, None, inventory),
        input_hash(spec, [], inventory),
        input_hash(nodes[:1], nodes[1:]),
        input_hash(nodes[:2], nodes[2:]),
        input_hash(nodes),
    }
    assert len(digests) == 7


def test_the_order_of_a_mapping_does_not_change_the_digest() -> None:
    spec, inventory = _inputs()
    node = inventory.nodes[0]
    labels = dict(reversed(list(node.labels.items())))
    assert list(labels) != list(node.labels)
    reordered = inventory.model_copy(
        update={"nodes": (node.model_copy(update={"labels": labels}), *inventory.nodes[1:])}
    )
    assert input_hash(spec, reordered) == input_hash(spec, inventory)


def test_the_digest_is_the_sha256_of_the_sorted_json() -> None:
    """For ASCII inputs the bytes digested are `json.dumps`'s with sorted keys and no spaces,
    as before orjson wrote them: a plan's digest did not change with the writer."""
    spec, inventory = _inputs()
    document = [p.model_dump(mode="json", by_alias=True) for p in (spec, inventory)]
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    assert input_hash(spec, inventory) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class _Huge(BaseModel):
    count: int
    labels: dict[str, str]


def test_integers_beyond_64_bits_and_other_text_are_digested_too() -> None:
    huge = _Huge(count=2**70, labels={"b": "é", "a": "x"})
    same = _Huge(count=2**70, labels={"a": "x", "b": "é"})
    assert input_hash(huge) == input_hash(same)
    assert input_hash(huge) != input_hash(_Huge(count=2**70 + 1, labels={"a": "x", "b": "é"}))
    assert input_hash(_Huge(count=1, labels={"b": "é"})) != input_hash(
        _Huge(count=1, labels={"b": "e"})
    )


def test_nodes_written_beforehand_give_the_same_digest_pass_after_pass(catalog) -> None:
    """The operator's passes write each node's JSON once, while its report and labels stay
    (`ResolvedNodes.canonical`): the digest is the one written afresh, whatever changed."""
    spec, inventory = _inputs()
    memo = ResolvedNodes()

    def digest(inv: Inventory) -> str:
        resolve_inventory(inv, catalog, memo=memo)
        kept = input_hash(spec, inv, nodes=memo.canonical)
        assert kept == input_hash(spec, inv)
        return kept

    first = digest(inventory)
    assert digest(inventory) == first
    node = inventory.nodes[0]
    relabelled = inventory.model_copy(
        update={"nodes": (node.model_copy(update={"labels": {"team": "x"}}), *inventory.nodes[1:])}
    )
    assert digest(relabelled) != first
    freed = node.gpus[0].model_copy(update={"in_use": {}})
    reported = inventory.model_copy(
        update={
            "nodes": (
                node.model_copy(update={"gpus": (freed, *node.gpus[1:])}),
                *inventory.nodes[1:],
            )
        }
    )
    assert digest(reported) not in (first, digest(relabelled))
    assert digest(inventory) == first
    # A node the memo never resolved is written afresh.
    assert input_hash(spec, inventory, nodes=ResolvedNodes().canonical) == first
