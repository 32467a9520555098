"""Hostile and odd input gets one line on stderr and exit code 2, never a traceback (70)."""

from __future__ import annotations

import copy
import os
import threading
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]
PLAN = yaml.safe_load((ROOT / "examples" / "plan.yaml").read_text())
CLUSTER = yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())


def preview(tmp_path: Path, capsys, plan: object, cluster: object) -> tuple[int, str]:
    plan_file, cluster_file = tmp_path / "plan.yaml", tmp_path / "cluster.yaml"
    plan_file.write_text(plan if isinstance(plan, str) else yaml.safe_dump(plan))
    cluster_file.write_text(cluster if isinstance(cluster, str) else yaml.safe_dump(cluster))
    code = run(["preview", str(plan_file), "--cluster", str(cluster_file), "-o", "json"])
    return code, capsys.readouterr().err


def preview_text(tmp_path: Path, capsys, cluster: dict) -> tuple[int, str, str]:
    """The text preview of the example plan on `cluster`: exit code, stdout, stderr."""
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    code = run(
        [
            "preview",
            str(ROOT / "examples" / "plan.yaml"),
            "--cluster",
            str(tmp_path / "cluster.yaml"),
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str) -> bool:
    return code == 2 and err.count("\n") == 1 and err.startswith("migplan: error: ")


def with_count(count: int) -> dict:
    plan = copy.deepcopy(PLAN)
    plan["spec"]["demand"]["profiles"][0]["count"] = count
    return plan


def test_huge_counts_are_refused(tmp_path: Path, capsys) -> None:
    for count in (10**18, 10**29):  # CP-SAT "model invalid" and a TypeError before
        code, err = preview(tmp_path, capsys, with_count(count), CLUSTER)
        assert one_line_error(code, err), err
        assert "less than or equal to 1000000" in err


def test_deeply_nested_yaml_is_refused(tmp_path: Path, capsys) -> None:
    code, err = preview(tmp_path, capsys, "a: " + "[" * 900 + "]" * 900, CLUSTER)
    assert one_line_error(code, err), err  # RecursionError before


def test_an_endless_file_is_refused(tmp_path: Path, capsys) -> None:
    code = run(["preview", "/dev/zero", "--cluster", str(ROOT / "examples" / "cluster.yaml")])
    err = capsys.readouterr().err
    assert one_line_error(code, err), err  # MemoryError after 2.7 GB before
    assert "larger than 64 MiB" in err


def test_an_over_long_layout_is_refused_at_once(tmp_path: Path, capsys) -> None:
    code = run(["check-layout", "H100-80GB", "+".join(f"1g.10gb@{k % 7}" for k in range(2000))])
    err = capsys.readouterr().err
    assert one_line_error(code, err), err  # 58 s before
    assert "more than 64 instances" in err


def test_a_malformed_kubeconfig_is_bad_input(tmp_path: Path, capsys) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("clusters: [\n  - {name: x\n")
    code = run(["status", "--kubeconfig", str(kubeconfig)])
    err = capsys.readouterr().err
    assert one_line_error(code, err), err  # a yaml ParserError (exit 70) before


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.text(max_size=12),
    st.sampled_from(["-", "7g.80gb@0", "1g.10gb@9", "3g.40gb@0+3g.40gb@4", "0 2 30 2 *", "2h"]),
)


def mutations(document: dict) -> st.SearchStrategy[dict]:
    """`document` with one value somewhere replaced by an odd one."""
    paths: list[tuple] = []

    def walk(node: object, path: tuple) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for k, value in enumerate(node):
                walk(value, (*path, k))

    walk(document, ())

    def put(path: tuple, value: object) -> dict:
        changed = copy.deepcopy(document)
        if not path:
            return changed
        node = changed
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return changed

    return st.builds(put, st.sampled_from(paths[1:]), SCALARS)


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        mutations(PLAN).map(lambda p: (p, CLUSTER)), mutations(CLUSTER).map(lambda c: (PLAN, c))
    )
)
def test_generated_plans_and_inventories_exit_0_or_2_with_one_line(
    tmp_path_factory, capsys, case
) -> None:
    plan, cluster = case
    code, err = preview(tmp_path_factory.mktemp("case"), capsys, plan, cluster)
    assert code == 0 or one_line_error(code, err), (code, err)


def test_a_key_given_twice_is_refused(tmp_path: Path, capsys) -> None:
    text = yaml.safe_dump(PLAN).replace("spec:\n", "spec:\n  dryRun: true\n  dryRun: false\n", 1)
    code, err = preview(tmp_path, capsys, text, CLUSTER)
    assert one_line_error(code, err), err
    assert "'dryRun' appears twice" in err  # the last one silently won before


def test_escape_sequences_in_names_never_reach_the_terminal(tmp_path: Path, capsys) -> None:
    # The text preview printed node names as given: an escape sequence in one cleared the
    # screen of whoever previewed the inventory.
    cluster = copy.deepcopy(CLUSTER)
    cluster["nodes"][0]["name"] = "a100-node-1\x1b[2J"
    code, out, err = preview_text(tmp_path, capsys, cluster)
    assert "\x1b" not in out + err
    assert one_line_error(code, err), err
    assert "\\x1b" in err


def test_a_node_name_kubernetes_would_refuse_is_refused(tmp_path: Path, capsys) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["nodes"][0]["name"] = "Node\x1b[31mRed"
    code, err = preview(tmp_path, capsys, PLAN, cluster)
    assert one_line_error(code, err), err


def test_a_broken_gpu_on_an_unselected_node_is_reported(tmp_path: Path, capsys) -> None:
    cluster = copy.deepcopy(CLUSTER)
    other = next(n for n in cluster["nodes"] if n["labels"].get("migplan.io/pool") != "shared")
    other["gpus"][0]["layout"] = "7g.80gb@3"  # invalid start
    code, err = preview(tmp_path, capsys, PLAN, cluster)
    assert one_line_error(code, err), err  # accepted before: the plan does not select it
    assert other["name"] in err


def test_the_same_pod_on_two_nodes_is_refused(tmp_path: Path, capsys) -> None:
    cluster = copy.deepcopy(CLUSTER)
    holders = [(n, g) for n in cluster["nodes"] for g in n["gpus"] if g.get("inUse")]
    (_, gpu_a), (_, gpu_b) = next(
        (a, b) for a in holders for b in holders if a[0]["name"] != b[0]["name"]
    )
    pod = next(iter(gpu_a["inUse"].values()))
    gpu_b["inUse"] = dict.fromkeys(gpu_b["inUse"], pod)
    code, err = preview(tmp_path, capsys, PLAN, cluster)
    assert one_line_error(code, err), err
    assert "two nodes" in err


def test_an_empty_string_is_not_a_layout(tmp_path: Path, capsys) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["nodes"][0]["gpus"][0]["layout"] = ""
    cluster["nodes"][0]["gpus"][0].pop("inUse", None)
    code, err = preview(tmp_path, capsys, PLAN, cluster)
    assert one_line_error(code, err), err


def test_an_export_that_selects_no_node_warns(tmp_path: Path, capsys) -> None:
    plan = copy.deepcopy(PLAN)
    plan["spec"]["nodeSelector"] = {"matchLabels": {"migplan.io/pool": "nowhere"}}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    code = run(
        [
            "export",
            "mig-parted",
            str(tmp_path / "plan.yaml"),
            "--cluster",
            str(ROOT / "examples" / "cluster.yaml"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0
    assert err.startswith("migplan: warning: the nodeSelector of shared-pool selects no GPU node")


def test_a_failing_kubeconfig_exec_plugin_gives_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": "/bin/false",
                                "interactiveMode": "Never",
                            }
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from migplan.operator.cli.app import main; main()",
            "status",
            "--kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
    )
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if not line.startswith("migplan: [")]
    assert len(said) == 1, done.stderr  # five lines before (ERROR:root, urllib3); progress aside
    assert said[0].startswith("migplan: error: cannot reach the Kubernetes API")


def test_a_json_inventory_plans_like_the_yaml_one_and_refuses_duplicate_keys(
    tmp_path: Path, capsys
) -> None:
    import json

    def plan_from(cluster_text: str) -> tuple[int, str, str]:
        (tmp_path / "plan.yaml").write_text(yaml.safe_dump(PLAN))
        (tmp_path / "cluster.json").write_text(cluster_text)
        argv = ["preview", str(tmp_path / "plan.yaml"), "--cluster", str(tmp_path / "cluster.json")]
        code = run([*argv, "-o", "json"])
        out, err = capsys.readouterr()
        return code, out, err

    def stable(out: str) -> dict:
        doc = json.loads(out)
        doc.pop("solver")
        return doc

    yaml_code, yaml_out, _ = plan_from(yaml.safe_dump(CLUSTER))
    json_code, json_out, _ = plan_from(json.dumps(CLUSTER))
    assert yaml_code == json_code == 0
    assert stable(json_out) == stable(yaml_out)
    code, _, err = plan_from(json.dumps(CLUSTER)[:-1] + ', "kind": "Inventory"}')
    assert one_line_error(code, err), err
    assert "'kind' appears twice" in err


def test_a_named_pipe_nobody_writes_to_is_given_up(tmp_path: Path, capsys, monkeypatch) -> None:
    from migplan.operator.cli import files

    monkeypatch.setattr(files, "FIFO_WRITER_WAIT_SECONDS", 0.5)
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    code = run(["preview", str(fifo), "--cluster", str(ROOT / "examples" / "cluster.yaml")])
    err = capsys.readouterr().err
    assert one_line_error(code, err), err  # blocked in open() for ever before
    assert "nothing wrote to within 0.5 s" in err


def test_a_named_pipe_with_a_late_writer_is_read(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    plan = (ROOT / "examples" / "plan.yaml").read_bytes()

    def write_later() -> None:
        time.sleep(0.3)
        fifo.write_bytes(plan)

    writer = threading.Thread(target=write_later)
    writer.start()
    code = run(["preview", str(fifo), "--cluster", str(ROOT / "examples" / "cluster.yaml")])
    writer.join()
    assert code == 0, capsys.readouterr().err


def test_a_number_past_4300_digits_or_a_date_that_does_not_exist_is_bad_input(
    tmp_path: Path, capsys
) -> None:
    digits = "9" * 5000
    cases = [
        (f"a: {digits}\n", "not valid YAML: a number of more than 4300 digits"),
        ("{" + f'"a": {digits}' + "}", "not valid JSON: a number of more than 4300 digits"),
        ("when: 2001-02-30\n", "not valid YAML: a date that does not exist"),
    ]
    for cluster, said in cases:
        code, err = preview(tmp_path, capsys, PLAN, cluster)
        assert one_line_error(code, err), err  # exit 70 with "internal error" before
        assert said in err


def test_escape_sequences_in_a_workload_name_never_reach_the_terminal(
    tmp_path: Path, capsys
) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["workloads"] = [
        {
            "namespace": "ml",
            "name": "job-\x1b]0;owned\x07",
            "podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/mig-1g.10gb": 1}}],
        }
    ]
    code, out, err = preview_text(tmp_path, capsys, cluster)
    assert "\x1b" not in out + err
    assert "\x07" not in out + err
    assert one_line_error(code, err), err
    assert "workloads[0]" in err


def test_aliases_that_would_multiply_the_document_are_refused(tmp_path: Path, capsys) -> None:
    # 1 MB of `*p` used to become gigabytes once read (each alias a whole copy).
    items = ", ".join(["x"] * 450)
    text = f"p: &p [{items}]\njunk:\n" + "- *p\n" * 200_000
    code, err = preview(tmp_path, capsys, PLAN, text)
    assert one_line_error(code, err), err
    assert "its aliases expand 200,455 values into 90,200,455 (more than 10 times)" in err


def test_a_few_aliases_are_read_as_usual(tmp_path: Path, capsys) -> None:
    cluster = copy.deepcopy(CLUSTER)
    cluster["nodes"][1]["labels"] = cluster["nodes"][0]["labels"]  # dumped as &id001 / *id001
    text = yaml.safe_dump(cluster)
    assert "*id001" in text
    code, err = preview(tmp_path, capsys, PLAN, text)
    assert code == 0, err
