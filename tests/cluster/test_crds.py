"""CRDs on the real API server: installed, examples accepted, bad manifests rejected by the
server itself with a message naming the field, printer columns shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from migplan.planner.api.spec import GPUPartitionPlan
from migplan.planner.errors import MigplanInputError
from migplan.planner.schema import parse_model

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
BAD = sorted((Path(__file__).parent / "bad-plans").glob("*.yaml"))


def expectation(path: Path) -> tuple[str, str]:
    lines = dict(
        line[2:].split(": ", 1)
        for line in path.read_text().splitlines()
        if line.startswith("# ") and ": " in line
    )
    return lines["field"], lines["expect"]


def test_corpus_is_big_enough() -> None:
    assert len(BAD) >= 20


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_manifest_is_rejected_by_the_api_server(crds, path) -> None:
    field, expect = expectation(path)
    result = crds.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert result.returncode != 0, f"{path.name} was accepted"
    assert field in result.stderr, result.stderr
    assert expect in result.stderr, result.stderr


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_the_python_model_agrees(path) -> None:
    with pytest.raises(MigplanInputError):
        parse_model(GPUPartitionPlan, yaml.safe_load(path.read_text()), source=path.name)


def test_examples_apply_and_show_printer_columns(crds) -> None:
    crds.kubectl("apply", "-f", str(ROOT / "examples" / "plan.yaml"))
    table = crds.kubectl("get", "gpp", "shared-pool").stdout
    assert table.split()[:7] == [
        "NAME",
        "PHASE",
        "NODES",
        "DEMAND-MET",
        "PROGRESS",
        "NEXT-WINDOW",
        "AGE",
    ]
    assert "shared-pool" in table
    wide = crds.kubectl("get", "gpupartitionplans", "-o", "wide").stdout
    assert "DRY-RUN" in wide.splitlines()[0]
    assert "WINDOW" in wide.splitlines()[0].split()
    assert "0 2 * * 6" in wide
    crds.kubectl("delete", "-f", str(ROOT / "examples" / "plan.yaml"))
    dra = ROOT / "examples" / "dra" / "plan.yaml"
    crds.kubectl("apply", "-f", str(dra))
    assert "dra-pool" in crds.kubectl("get", "gpp", "dra-pool").stdout
    crds.kubectl("delete", "-f", str(dra))


def test_node_partition_spec_and_status_round_trip(crds) -> None:
    partition = {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "NodePartition",
        "metadata": {"name": "gpu-node-1"},
        "spec": {
            "nodeName": "gpu-node-1",
            "plan": "shared-pool",
            "planGeneration": 1,
            "gpus": [{"index": 0, "layout": "3g.40gb@0+4g.40gb@4"}],
        },
    }
    bad = json.loads(json.dumps(partition))
    bad["spec"]["gpus"][0]["layout"] = "3g.40gb"
    rejected = crds.kubectl(
        "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(bad), check=False
    )
    assert rejected.returncode != 0
    assert "spec.gpus[0].layout" in rejected.stderr
    crds.kubectl("apply", "-f", "-", stdin=json.dumps(partition))
    crds.kubectl(
        "patch",
        "nodepartition",
        "gpu-node-1",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Applied", "appliedGeneration": 1, "gpuCount": 1}}),
    )
    table = crds.kubectl("get", "np", "gpu-node-1").stdout
    assert table.split()[:6] == ["NAME", "NODE", "GPUS", "PHASE", "APPLIED", "AGE"]
    assert table.splitlines()[1].split()[:5] == ["gpu-node-1", "gpu-node-1", "1", "Applied", "1"]
