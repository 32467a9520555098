"""`migplan preview` on the bundled examples, and its answers to bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]
PLAN = str(ROOT / "examples" / "plan.yaml")
CLUSTER = str(ROOT / "examples" / "cluster.yaml")


def call(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_text_preview_shows_geometry_evictions_demand_and_solver(capsys) -> None:
    code, out, err = call(capsys, "preview", PLAN, "--cluster", CLUSTER)
    assert code == 0, err
    assert "Plan shared-pool: 4 nodes, 8 GPUs covered" in out
    assert "node h100-node-2" in out
    assert "evict     batch/etl-" in out
    assert "|+7g.80gb" in out  # the new instance in the after picture
    assert "|!1g" in out  # an in-use instance whose pod is evicted
    assert "Demand" in out
    assert "Solver: cp-sat OPTIMAL" in out
    assert "h100-node-3" not in out  # outside the node selector


def test_json_preview_has_the_documented_fields(capsys) -> None:
    code, out, _ = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert {"node", "gpu", "model", "before", "after", "evict"} <= set(doc["gpus"][0])
    assert {"resource", "requested", "met"} <= set(doc["demand"][0])
    # one of the two H100s holding a single small in-use instance becomes the 7g.80gb;
    # both small pods move (the other GPU becomes 4g+3g)
    [big] = [g for g in doc["gpus"] if g["after"] == "7g.80gb@0"]
    assert big["evict"] == list(big["inUse"].values())
    assert {p for g in doc["gpus"] for p in g["evict"]} == {"batch/etl-7", "batch/etl-8"}
    assert doc["solver"]["status"] == "OPTIMAL"
    assert doc["name"] == "shared-pool"
    assert doc["inputHash"].startswith("sha256:")
    # the namespace selector leaves out the default namespace's pod
    assert "nvidia.com/mig-1g.5gb" not in {d["resource"] for d in doc["demand"]}


def test_preview_is_deterministic_and_yaml_matches_json(capsys) -> None:
    _, first, _ = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "-o", "json")
    _, again, _ = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "-o", "json")
    _, as_yaml, _ = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "-o", "yaml")

    def stable(doc):
        doc["solver"] = {
            k: v
            for k, v in doc["solver"].items()
            if k not in ("wallSeconds", "buildSeconds", "stages")
        }
        return doc

    assert stable(json.loads(first)) == stable(json.loads(again))
    assert stable(yaml.safe_load(as_yaml)) == stable(json.loads(first))


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


INVENTORY = """
nodes:
  - name: n1
    labels: {migplan.io/pool: shared}
    gpus:
      - {index: 0, model: MODEL, layout: "LAYOUT", inUse: INUSE}
"""


def inventory(tmp_path, model="A30", layout="-", in_use="{}") -> str:
    text = INVENTORY.replace("MODEL", model).replace("LAYOUT", layout).replace("INUSE", in_use)
    return write(tmp_path, "inv.yaml", text)


def plan_with(tmp_path, profiles: str) -> str:
    text = (
        Path(PLAN)
        .read_text()
        .replace("- {resource: nvidia.com/mig-2g.20gb, count: 2, priority: 5}", profiles)
    )
    return write(tmp_path, "plan.yaml", text)


def policy_with(tmp_path, allowed: str) -> str:
    text = (
        Path(PLAN)
        .read_text()
        .replace(
            "    maxNodesChanged: 3", f"    maxNodesChanged: 3\n    allowedProfiles: {allowed}"
        )
    )
    return write(tmp_path, "plan.yaml", text)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t: (PLAN, inventory(t, model="V100")), "unknown GPU model 'V100'"),
        (lambda t: (PLAN, inventory(t, layout="4g.24gb@1")), "4g.24gb cannot start at slice 1"),
        (lambda t: (PLAN, inventory(t, layout="4g.24gb")), "is not of the form PROFILE@START"),
        (lambda t: (PLAN, inventory(t, layout="3g.40gb@0")), "A30 has no profile '3g.40gb'"),
        (
            lambda t: (policy_with(t, "{A30: [9g.99gb]}"), inventory(t)),
            "spec.policy.allowedProfiles: unknown profile '9g.99gb' for A30",
        ),
        (
            lambda t: (policy_with(t, "{V100: [1g.5gb]}"), inventory(t)),
            "spec.policy.allowedProfiles: unknown GPU model 'V100'",
        ),
        (
            lambda t: (policy_with(t, "{NVIDIA A30: [1g.6gb]}"), inventory(t)),
            "use the catalog key 'A30', not 'NVIDIA A30'",
        ),
        (
            lambda t: (PLAN, inventory(t, layout="4g.24gb@0", in_use='{"1g.6gb@0": ns/a}')),
            "in-use instance 1g.6gb@0 is not in the current layout",
        ),
        (
            lambda t: (
                plan_with(t, "- {resource: nvidia.com/mig-1g.6gb, count: -1}"),
                inventory(t),
            ),
            "spec.demand.profiles[0].count",
        ),
        (
            lambda t: (plan_with(t, "- {resource: nvidia.com/mig-9x, count: 1}"), inventory(t)),
            "spec.demand.profiles[0].resource",
        ),
        (
            lambda t: (write(t, "p.yaml", "kind: GPUPartitionPlan\nspec: [\n"), inventory(t)),
            "not valid YAML (line 3",
        ),
        (
            lambda t: (write(t, "p.yaml", "kind: ConfigMap\n"), inventory(t)),
            "no document of kind GPUPartitionPlan",
        ),
        (lambda t: (str(t / "missing.yaml"), inventory(t)), "missing.yaml: no such file"),
        (lambda t: (PLAN, write(t, "inv.yaml", "nodes: 3\n")), "inv.yaml: nodes: "),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, make, message) -> None:
    plan_file, cluster = make(tmp_path)
    code, out, err = call(capsys, "preview", plan_file, "--cluster", cluster)
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1
    assert message in err


def test_live_cluster_needs_a_kubeconfig(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    code, _, err = call(capsys, "preview", PLAN)
    assert code == 2
    assert "no cluster to talk to" in err
    assert "pass --kubeconfig or --context, set KUBECONFIG, or write ~/.kube/config" in err
    code, _, err = call(capsys, "preview", PLAN, "--kubeconfig", "/nonexistent/config")
    assert code == 2
    assert err.count("\n") == 1


def test_unreachable_cluster_is_one_line(capsys, tmp_path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    code, _, err = call(capsys, "inventory", "--kubeconfig", str(config))
    assert code == 4
    said = [line for line in err.splitlines() if not line.startswith("migplan: [")]  # progress
    assert len(said) == 1, err
    assert said[0].startswith("migplan: error: cannot reach the Kubernetes API")


def preview_example(capsys, folder: str) -> dict:
    """The JSON preview of examples/FOLDER's plan on its offline cluster."""
    plan, cluster = (str(ROOT / "examples" / folder / f) for f in ("plan.yaml", "cluster.yaml"))
    code, out, err = call(capsys, "preview", plan, "--cluster", cluster, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def test_dra_example_previews_offline_with_either_or_claims(capsys) -> None:
    doc = preview_example(capsys, "dra")
    # Instances: 1 explicit, 2 either/or claims, 1 finetune, the pair pod's 2.
    assert doc["summary"]["met"] == doc["summary"]["requested"] == 6
    claims = next(d for d in doc["demand"] if d["alternatives"] and d["kind"] == "free")
    assert sum(claims["served"].values()) == 2
    assert set(claims["served"]) <= {claims["profile"], *claims["alternatives"]}
    # The pair pod's claim asks for two devices: both on one node.
    (pair,) = (d for d in doc["demand"] if d["perPod"])
    assert (pair["perPod"], pair["met"], pair["pods"]) == (
        [{"profiles": ["1g.10gb"], "count": 2}],
        1,
        ["ml/pair-0"],
    )
    nodes = {g["node"] for g in doc["gpus"] if "1g.10gb" in g["after"]}
    assert len(nodes) == 1
    assert doc["summary"]["evictions"] == 0  # the instances claims hold stay


def test_kueue_example_previews_offline_with_its_workloads(capsys) -> None:
    doc = preview_example(capsys, "kueue")
    # The Workload waiting on the check, and the one pending in the plan's ClusterQueue.
    assert [(d["pods"], d["met"]) for d in doc["demand"]] == [
        (["ml/job-finetune-5f2c1"], 2),
        (["ml/job-eval-8d0e4"], 1),
    ]


def test_an_api_refusal_is_one_line_with_the_api_exit_code(capsys, monkeypatch) -> None:
    from kubernetes.client.exceptions import ApiException

    from migplan.operator.cli import preview

    def refuse(*_: object, **__: object) -> None:
        raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(preview, "input_inventory", refuse)
    code, _, err = call(capsys, "preview", PLAN)
    assert code == 4
    assert err.startswith("migplan: error: the Kubernetes API answered 403 Forbidden")
    assert err.count("\n") == 1


def test_an_offline_preview_does_not_load_the_kubernetes_client() -> None:
    # A third of a second of every offline preview went to importing a client it never used,
    # and a tenth to NVML's binding, its emulator and prometheus_client.
    unused = ("kubernetes", "kopf", "pynvml", "prometheus_client")
    program = (
        "import sys\n"
        "from migplan.operator.cli.app import run\n"
        f"code = run(['preview', {PLAN!r}, '--cluster', {CLUSTER!r}, '-o', 'json'])\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {unused!r})\n"
        "sys.stderr.write(repr(loaded))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith("[]")


def test_preview_leaves_out_the_nodes_the_operator_would(capsys, tmp_path) -> None:
    """A node on the single MIG strategy: doctor calls it blocking, the operator leaves it
    out, and so does the preview (one screening for all three)."""
    document = yaml.safe_load(Path(CLUSTER).read_text())
    node = document["nodes"][0]
    node["labels"]["nvidia.com/mig.strategy"] = "single"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(document))
    code, out, err = call(capsys, "preview", PLAN, "--cluster", str(cluster), "-o", "json")
    assert code == 0
    assert f"migplan: warning: node {node['name']} left out: preflight:" in err
    assert node["name"] not in {g["node"] for g in json.loads(out)["gpus"]}
    code, out, _ = call(capsys, "doctor", "--cluster", str(cluster), "-o", "json")
    assert code == 1
    assert node["name"] in out


def test_gangs_are_shown_met_whole_or_not_at_all(capsys) -> None:
    gangs = ROOT / "examples" / "gangs"
    argv = ("preview", str(gangs / "plan.yaml"), "--cluster", str(gangs / "cluster.yaml"))
    code, out, err = call(capsys, *argv)
    assert code == 0, err
    assert "Gangs (all or none)" in out
    assert "| PodGroup ml/train | 3 x 2g.20gb |   3 | 3/3 | yes" in out
    assert "| Workload ml/big   | 3 x 4g.40gb |   3 | 0/3 | no" in out
    assert "gang ml/big: 3 x 4g.40gb, all or none — not met: at most 2 of its pods fit" in out
    code, out, err = call(capsys, *argv, "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert {g["name"]: g["admitted"] for g in plan["gangs"]} == {
        "PodGroup ml/train": True,
        "Workload ml/sweep": True,
        "Workload ml/big": False,
    }
    big = [d for d in plan["demand"] if d["gang"] == "Workload ml/big"]
    assert [(d["met"], d["minCount"]) for d in big] == [(0, 3)]


def test_the_html_report_lists_the_gangs(capsys, tmp_path) -> None:
    gangs = ROOT / "examples" / "gangs"
    report = tmp_path / "report.html"
    argv = ("preview", str(gangs / "plan.yaml"), "--cluster", str(gangs / "cluster.yaml"))
    code, _, err = call(capsys, *argv, "--html", str(report))
    assert code == 0, err
    html = report.read_text()
    assert "<h2>Gangs (all or none)</h2>" in html
    assert '<tr class="unmet">\n<td>Workload ml/big</td><td>3 x 4g.40gb</td><td>3</td>' in html


def test_a_plan_the_solver_had_no_time_for_says_so(tmp_path, capsys) -> None:
    plan = yaml.safe_load((ROOT / "examples" / "plan.yaml").read_text())
    cluster = str(ROOT / "examples" / "cluster.yaml")
    assert run(["preview", str(ROOT / "examples" / "plan.yaml"), "--cluster", cluster]) == 0
    assert "had no time" not in capsys.readouterr().out
    plan["spec"].setdefault("solver", {})["timeLimitSeconds"] = 0.001
    rushed = tmp_path / "rushed.yaml"
    rushed.write_text(yaml.safe_dump(plan))
    assert run(["preview", str(rushed), "--cluster", cluster]) == 0
    out = capsys.readouterr().out
    assert "warning: the solver had no time for its first stage (demand met)" in out
    assert "Raise spec.solver.timeLimitSeconds" in " ".join(out.split())
    html = tmp_path / "rushed.html"
    assert run(["preview", str(rushed), "--cluster", cluster, "--html", str(html)]) == 0
    assert "the solver had no time for its first stage" in html.read_text()


def test_the_scale_out_example_shows_the_nodes_to_add_and_what_they_host(capsys, tmp_path) -> None:
    folder = ROOT / "examples" / "scale-out"
    argv = ("preview", str(folder / "plan.yaml"), "--cluster", str(folder / "cluster.yaml"))
    code, out, err = call(capsys, *argv, "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    assert "Scale out: add 2 x h100-8x (cost 2): meets 17 of the 17 pending pods" in out
    assert "new node h100-8x-2  (h100-8x, 8 x H100-80GB)" in out
    assert "pods (nvidia.com/mig-3g.40gb) of PodGroup ml/train-big" in out
    assert "gpu 1-7   whole (not partitioned)" in out
    html = (tmp_path / "r.html").read_text()
    assert '<section class="new-node" data-node="h100-8x-1">' in html
    code, out, err = call(capsys, *argv, "-o", "json")
    scale = json.loads(out)["scaleOut"]
    assert [n["name"] for n in scale["nodes"]] == ["h100-8x-1", "h100-8x-2"]
    assert {i["gang"]: i["met"] for i in scale["items"]} == {None: 1, "PodGroup ml/train-big": 16}


def test_an_offer_the_plan_would_not_cover_is_bad_input(capsys, tmp_path) -> None:
    folder = ROOT / "examples" / "scale-out"
    text = (folder / "plan.yaml").read_text().replace("          migplan.io/pool: training\n", "")
    plan = write(tmp_path, "plan.yaml", text)
    code, _, err = call(capsys, "preview", plan, "--cluster", str(folder / "cluster.yaml"))
    assert code == 2, err
    assert "spec.nodeSelector does not select a node with its nodeSelector's labels" in err
    text = (folder / "plan.yaml").read_text().replace("gpuModel: H100-80GB", "gpuModel: H999")
    plan = write(tmp_path, "plan.yaml", text)
    code, _, err = call(capsys, "preview", plan, "--cluster", str(folder / "cluster.yaml"))
    assert code == 2, err
    assert "spec.scaleOut.offers[0].gpuModel: unknown GPU model 'H999'" in err


def test_a_previous_plan_is_the_start_and_kept_where_still_best(capsys, tmp_path) -> None:
    code, first, err = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "-o", "json")
    assert code == 0, err
    earlier = write(tmp_path, "earlier.json", first)
    code, again, err = call(
        capsys, "preview", PLAN, "--cluster", CLUSTER, "-o", "json", "--previous", earlier
    )
    assert code == 0, err
    before, after = json.loads(first), json.loads(again)
    assert after["solver"]["startedFrom"] == "previous plan"
    assert after["solver"]["chosen"] == "previous plan"  # as good: kept
    assert [g["after"] for g in after["gpus"]] == [g["after"] for g in before["gpus"]]
    assert after["summary"] == before["summary"]
    code, text, err = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "--previous", earlier)
    assert code == 0, err
    assert "started from previous plan, returned previous plan;" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]\n", "expected one plan document"),
        ('{"name": "shared-pool", "gpus": [{"node": "a"}]}', "gpus[0].gpu: Field required"),
        (
            '{"name": "other", "gpus": []}',
            "a plan of GPUPartitionPlan 'other', not of 'shared-pool'",
        ),
        (
            json.dumps({"gpus": [{"node": "a", "gpu": 0, "after": "-"}] * 2}),
            "lists GPU a/gpu-0 twice",
        ),
    ],
)
def test_a_bad_previous_plan_is_one_line_exit_2(capsys, tmp_path, text, message) -> None:
    earlier = write(tmp_path, "earlier.json", text)
    code, out, err = call(capsys, "preview", PLAN, "--cluster", CLUSTER, "--previous", earlier)
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1
    assert message in err
