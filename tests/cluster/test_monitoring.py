"""Monitoring against the live processes: every query of the Grafana dashboard names a metric
the operator or the agent exports on /metrics, the agent's metrics move with its passes, and
the operator's log (kopf's records included) is one JSON event per line in migplan's shape."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from nodes import gpu_node
from operator_proc import free_port, running_operator
from waiting import wait_for

from migplan.operator.kube.connect import connect

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "migplan" / "dashboards" / "migplan.json"
METRIC = re.compile(r"\bmigplan_[a-z0-9_]+")
SAMPLE_SUFFIXES = ("_bucket", "_sum", "_count", "_created")


def scrape(port: int) -> str | None:
    """GET /metrics on `port`; None while nothing listens there yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return reply.read().decode()
    except urllib.error.URLError:
        return None


def families(text: str) -> set[str]:
    """Metric families declared in a /metrics text (labelled ones even before a sample)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample `name{labels}`, if there is one."""
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            head, value = line.rsplit(" ", 1)
            if head.split("{")[0] == name:
                return float(value)
    return None


def liveness(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return json.loads(response.read())
    except OSError:
        return None


def dashboard_metrics() -> set[str]:
    document = json.loads(DASHBOARD.read_text())
    names = set()
    for panel in document["panels"]:
        for target in panel["targets"]:
            for found in METRIC.findall(target["expr"]):
                name = found
                for suffix in SAMPLE_SUFFIXES:
                    name = name.removesuffix(suffix)
                names.add(name)
    return names


def agent_reports(port: int) -> str | None:
    """The agent's /metrics once it shows the two 3g instances it was asked for."""
    text = scrape(port)
    if text and sample(text, "migplan_agent_instances", profile="3g.40gb") == 2:
        return text
    return None


def partition(name: str, layout: str) -> dict:
    return {
        "apiVersion": "migplan.io/v1alpha1",
        "kind": "NodePartition",
        "metadata": {"name": name},
        "spec": {"nodeName": name, "gpus": [{"index": 0, "layout": layout}]},
    }


def test_dashboard_queries_name_metrics_the_live_processes_export(crds) -> None:
    cp = crds
    api = connect(kubeconfig=str(cp.kubeconfig))
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps(gpu_node("mon-h100", product="NVIDIA-H100-80GB-HBM3"))
    )
    api.plans.apply_node_partition(body=partition("mon-h100", "3g.40gb@0+3g.40gb@4"))
    agent_port, operator_port = free_port(), free_port()
    agent = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "migplan"),
            "agent",
            "--node",
            "mon-h100",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--simulate",
            "H100-80GB",
            "--interval",
            "2",
            "--metrics-port",
            str(agent_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        agent_text = wait_for(
            lambda: agent_reports(agent_port), "the agent to report its instances on /metrics", 60
        )
        health_port = free_port()
        with running_operator(
            cp,
            metrics_port=operator_port,
            extra_args=("--liveness", f"http://127.0.0.1:{health_port}/healthz"),
        ) as operator:
            operator_text = wait_for(
                lambda: (
                    (text := scrape(operator_port))
                    and 'resource="gpupartitionplans"' in text
                    and "migplan_nodes_cordoned " in text
                    and text
                ),
                "the operator's /metrics after a ticker round",
            )
            # What it asks of the API server, by verb and resource.
            assert (
                sample(
                    operator_text,
                    "migplan_api_requests_total",
                    verb="list",
                    resource="gpupartitionplans",
                    code="200",
                )
                >= 1
            )
            # Liveness includes the ticker's probe: seconds since its last tick.
            health = wait_for(lambda: liveness(health_port), "kopf's liveness endpoint")
            assert 0 <= health["ticker"] < 5
            exported = families(agent_text) | families(operator_text)
            missing = sorted(dashboard_metrics() - exported)
            assert not missing, f"dashboard queries metrics nobody exports: {missing}"
            assert len(dashboard_metrics()) >= 10
            # The agent's figures are live: the pass applied a layout through NVML.
            assert sample(agent_text, "migplan_agent_phase", phase="Applied") == 1
            assert sample(agent_text, "migplan_agent_passes_total", result="ok") >= 1
            assert sample(agent_text, "migplan_agent_last_apply_timestamp_seconds") > 0
            created = sample(
                agent_text,
                "migplan_agent_nvml_call_seconds_count",
                call="nvmlDeviceCreateGpuInstanceWithPlacement",
            )
            assert created == 2
        log = operator.output  # type: ignore[attr-defined]
    finally:
        agent.terminate()
        agent.wait(timeout=30)
        # Leave no schedulable MIG node behind for other tests' pods.
        cp.kubectl("delete", "node", "mon-h100", "--wait=false", check=False)
        cp.kubectl("delete", "nodepartition", "mon-h100", "--wait=false", check=False)
    lines = [line for line in log.splitlines() if line.strip()]
    events = [json.loads(line) for line in lines]  # every line one JSON event
    assert all({"event", "level", "timestamp"} <= e.keys() for e in events)
    assert any(e.get("logger", "").startswith("kopf") for e in events), "no kopf record"


def test_chart_dashboard_configmap_holds_the_dashboard(control_plane) -> None:
    helm = control_plane.bin_dir / "helm"
    out = subprocess.run(
        [
            str(helm),
            "template",
            "migplan",
            str(ROOT / "charts" / "migplan"),
            "--set",
            "metrics.grafanaDashboard.enabled=true",
            "-s",
            "templates/dashboard.yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    configmap = yaml.safe_load(out)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["migplan.json"]) == json.loads(DASHBOARD.read_text())
