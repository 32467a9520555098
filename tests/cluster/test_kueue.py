"""Kueue end to end: Kueue's real controller reserves quota for a Job nobody's GPUs can run,
waits on migplan's AdmissionCheck, migplan reshapes the GPU, says Ready, Kueue admits, and
the pods run; a Job the plan cannot meet gets Retry, one no covered GPU offers Rejected."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from nodes import KWOK_TOLERATION, POOL
from operator_proc import running_operator
from pools import ALWAYS_OPEN, apply, build_pool, layout_of, make_plan, plan_status
from rollout_records import rollout_nodes
from waiting import wait_for

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
NS = "kq"
KUEUE_WORKLOADS = "workloads.kueue.x-k8s.io"
"""Kueue's Workloads by their full name: with GenericWorkload on (the gang tests), the API
server also serves `workloads` of scheduling.k8s.io, which kubectl picks for the short name."""
QUOTA = {
    "nvidia.com/mig-2g.20gb": 4,
    "nvidia.com/mig-7g.80gb": 2,
    "nvidia.com/mig-2g.24gb": 1,  # an H20/H200 profile: no H100 offers it
}


def queue_objects(ns: str = NS, quota: dict[str, int] = QUOTA) -> list[dict]:
    """A ClusterQueue `ns` whose quota covers the MIG resources, guarded by migplan's check
    naming plan `ns`; its LocalQueue `team` in namespace `ns`."""
    group = "kueue.x-k8s.io/v1beta2"
    return [
        {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": f"{ns}-mig"}},
        {
            "apiVersion": group,
            "kind": "AdmissionCheck",
            "metadata": {"name": f"{ns}-migplan"},
            "spec": {
                "controllerName": "migplan.io/partition",
                "parameters": {"apiGroup": "migplan.io", "kind": "GPUPartitionPlan", "name": ns},
            },
        },
        {
            "apiVersion": group,
            "kind": "ClusterQueue",
            "metadata": {"name": ns},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": list(quota),
                        "flavors": [
                            {
                                "name": f"{ns}-mig",
                                "resources": [
                                    {"name": r, "nominalQuota": n} for r, n in quota.items()
                                ],
                            }
                        ],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": f"{ns}-migplan"}]},
            },
        },
        {
            "apiVersion": group,
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": ns},
            "spec": {"clusterQueue": ns},
        },
    ]


def job(name: str, resource: str, pods: int, ns: str = NS) -> dict:
    """A Job of `pods` pods, one `resource` each, queued on `team` in `ns` (created
    suspended, as Kueue's Job webhook would leave it), on the nodes of pool `ns`."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"kueue.x-k8s.io/queue-name": "team"},
        },
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {POOL: ns},
                    "tolerations": [
                        KWOK_TOLERATION,
                        {"key": POOL, "operator": "Equal", "value": ns, "effect": "NoSchedule"},
                    ],
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/train:latest",
                            "resources": {"limits": {resource: 1}},
                        }
                    ],
                }
            },
        },
    }


def wait_active(cp, ns: str) -> None:
    """Until the operator marks the AdmissionCheck of plan `ns` Active (Kueue keeps the
    ClusterQueue from reserving quota before)."""
    wait_for(
        lambda: "Active" in cp.kubectl(
            "get", "admissioncheck", f"{ns}-migplan", "-o",
            "jsonpath={.status.conditions[?(@.status=='True')].type}",
        ).stdout,
        "the AdmissionCheck Active",
    )  # fmt: skip


def workload_of(cp, job_name: str, ns: str = NS) -> dict | None:
    found = json.loads(cp.kubectl("get", KUEUE_WORKLOADS, "-n", ns, "-o", "json").stdout)["items"]
    return next(
        (
            w
            for w in found
            if any(o.get("name") == job_name for o in w["metadata"].get("ownerReferences", []))
        ),
        None,
    )


def check_state(cp, job_name: str, ns: str = NS) -> tuple[str | None, str, int]:
    """(state, message, retryCount) of the migplan check on the Job's Workload."""
    workload = workload_of(cp, job_name, ns) or {}
    for entry in (workload.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == f"{ns}-migplan":
            return entry.get("state"), entry.get("message", ""), entry.get("retryCount") or 0
    return None, "", 0


def condition(cp, job_name: str, kind: str, ns: str = NS) -> bool:
    workload = workload_of(cp, job_name, ns) or {}
    return any(
        c["type"] == kind and c["status"] == "True"
        for c in (workload.get("status") or {}).get("conditions") or []
    )


def rejection(cp) -> str:
    """The message of Kueue's AdmissionCheckRejected event, if there is one yet."""
    events = json.loads(
        cp.kubectl(
            "get", "events", "-n", NS, "--field-selector", "reason=AdmissionCheckRejected",
            "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    return " ".join(e.get("message", "") for e in events)


def started_pods(cp, job_name: str, ns: str = NS) -> int:
    """The Job's pods that ran (kwok completes a Job's pods soon after they start)."""
    pods = json.loads(
        cp.kubectl(
            "get", "pods", "-n", ns, "-l", f"batch.kubernetes.io/job-name={job_name}", "-o", "json"
        ).stdout
    )["items"]
    return sum(1 for p in pods if p["status"].get("phase") in ("Running", "Succeeded"))


def test_the_kueue_examples_are_accepted(control_plane, crds) -> None:
    cp = crds
    cp.start_kueue()
    if cp.kubectl("get", "namespace", "ml", check=False).returncode != 0:
        cp.kubectl("create", "namespace", "ml")
    for name in ("queue.yaml", "plan.yaml", "job.yaml"):
        path = ROOT / "examples" / "kueue" / name
        cp.kubectl("apply", "--dry-run=server", "-f", str(path))


def test_admission_check_reshapes_then_admits(control_plane, crds, operator_kubeconfig) -> None:
    cp = crds
    cp.start_kueue()
    # One H100 holding two 1g.10gb: no 2g.20gb anywhere.
    fleet = build_pool(cp, NS, {f"{NS}-a": "1g.10gb@0+1g.10gb@1"})
    try:
        apply(cp, *queue_objects())
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            demand = {"fromKueue": {"priority": 5}}
            policy = {"disruption": "none"}
            apply(cp, make_plan(NS, NS, window=ALWAYS_OPEN, demand=demand, policy=policy))
            # The operator marks its check Active, so the ClusterQueue can reserve quota.
            wait_active(cp, NS)
            started = time.monotonic()
            apply(cp, job("train", "nvidia.com/mig-2g.20gb", 2))
            wait_for(lambda: condition(cp, "train", "QuotaReserved"), "quota reserved")
            reserved = time.monotonic() - started
            wait_for(lambda: condition(cp, "train", "Admitted"), "Kueue admits", timeout=120)
            admitted = time.monotonic() - started
            assert check_state(cp, "train")[0] == "Ready"
            wait_for(lambda: started_pods(cp, "train") == 2, "the Job's pods run", timeout=90)
            ran = time.monotonic() - started
            status = plan_status(cp, NS)
            assert rollout_nodes(cp, NS, status)[f"{NS}-a"]["step"] == "Done"
            after = status["plan"]["nodes"][f"{NS}-a"][0]["after"]
            assert after.count("2g.20gb") == 2
            print(
                f"kueue: quota reserved {reserved:.1f} s, admitted {admitted:.1f} s, "
                f"pods Running {ran:.1f} s after the Job was created"
            )

            # Two whole-GPU instances on a fleet of one GPU: the plan meets one at most.
            apply(cp, job("big", "nvidia.com/mig-7g.80gb", 2))
            wait_for(
                lambda: (s := check_state(cp, "big"))[0] == "Retry" or s[2] >= 1,
                "Retry for a Job the plan cannot meet",
                timeout=90,
            )
            assert not condition(cp, "big", "Admitted")

            apply(cp, job("odd", "nvidia.com/mig-2g.24gb", 1))
            # Kueue deactivates a Workload whose check is Rejected, saying why in an event.
            rejected = wait_for(
                lambda: rejection(cp),
                "Rejected for a profile no covered GPU offers",
                timeout=90,
            )
            assert "no GPU this plan covers offers 1 x 2g.24gb" in rejected
            assert (workload_of(cp, "odd") or {})["spec"].get("active") is False
            assert not condition(cp, "odd", "Admitted")
    finally:
        fleet.stop()
        for name in ("train", "big", "odd"):
            cp.kubectl("delete", "job", "-n", NS, name, "--wait=false", check=False)


def test_pending_workloads_of_a_queue_count_ahead_of_admission(
    control_plane, crds, operator_kubeconfig
) -> None:
    # No AdmissionCheck: a ClusterQueue out of quota keeps the Workload pending, and a plan
    # that names the queue in fromKueue.clusterQueues plans for it anyway.
    cp, ns = crds, "kqa"
    cp.start_kueue()
    fleet = build_pool(cp, ns, {f"{ns}-a": "-"})
    group = "kueue.x-k8s.io/v1beta2"
    try:
        apply(
            cp,
            {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": "kqa-mig"}},
            {
                "apiVersion": group,
                "kind": "ClusterQueue",
                "metadata": {"name": "kqa"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/mig-3g.40gb"],
                            "flavors": [
                                {
                                    "name": "kqa-mig",
                                    "resources": [
                                        {"name": "nvidia.com/mig-3g.40gb", "nominalQuota": 0}
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": group,
                "kind": "LocalQueue",
                "metadata": {"name": "team", "namespace": ns},
                "spec": {"clusterQueue": "kqa"},
            },
        )
        waiting = {**job("eval", "nvidia.com/mig-3g.40gb", 2)}
        waiting["metadata"] = {**waiting["metadata"], "namespace": ns}
        apply(cp, waiting)
        wait_for(lambda: workload_in(cp, ns), "Kueue's Workload for the Job")
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            demand = {"fromKueue": {"clusterQueues": ["kqa"]}}
            apply(cp, make_plan(ns, ns, window=ALWAYS_OPEN, demand=demand, dryRun=True))
            status = wait_for(
                lambda: (s := plan_status(cp, ns)).get("phase") == "Planned" and s, "Planned"
            )
        (row,) = status["plan"]["demand"]
        assert (row["resource"], row["requested"], row["met"]) == ("nvidia.com/mig-3g.40gb", 2, 2)
    finally:
        fleet.stop()
        cp.kubectl("delete", "job", "-n", ns, "eval", "--wait=false", check=False)


def workload_in(cp, namespace: str) -> bool:
    found = cp.kubectl("get", KUEUE_WORKLOADS, "-n", namespace, "-o", "name", check=False)
    return bool(found.stdout.strip())


def test_a_job_whose_pods_cannot_all_fit_gets_nothing_and_a_smaller_one_runs(
    control_plane, crds, operator_kubeconfig
) -> None:
    """One empty H100; a Job of three 4g.40gb pods (one fits) and a Job of two 2g.20gb, both
    with quota reserved in the same pass. Counted pod by pod, the best plan made a 4g.40gb
    and one 2g.20gb: neither Job could start. All or nothing, the big Job gets Retry and no
    4g.40gb is made; the small one is admitted and runs."""
    cp, ns = crds, "kqg"
    cp.start_kueue()
    fleet = build_pool(cp, ns, {f"{ns}-a": "-"})
    quota = {"nvidia.com/mig-4g.40gb": 3, "nvidia.com/mig-2g.20gb": 2}
    try:
        apply(cp, *queue_objects(ns, quota))
        with running_operator(cp, kubeconfig=operator_kubeconfig):
            demand = {"fromKueue": {"priority": 5}}
            apply(cp, make_plan(ns, ns, window=ALWAYS_OPEN, demand=demand))
            wait_active(cp, ns)
            apply(
                cp,
                job("big", "nvidia.com/mig-4g.40gb", 3, ns),
                job("pair", "nvidia.com/mig-2g.20gb", 2, ns),
            )
            # Admitted, its pods run (kwok finishes them soon after, and Kueue then drops
            # the Workload's Admitted condition: the pods are what stays).
            wait_for(lambda: started_pods(cp, "pair", ns) == 2, "the pair runs", timeout=120)
            # Kueue turns a Retry back to Pending as soon as it requeues the Workload, so the
            # plan's record of its verdict is what a test can wait for.
            wait_for(
                lambda: any(
                    key.startswith(f"{ns}/job-big") and not record["met"]
                    for key, record in (plan_status(cp, ns).get("kueue") or {}).items()
                ),
                "the verdict Retry for the Job whose pods cannot all fit",
                timeout=90,
            )
            status = plan_status(cp, ns)
        assert not condition(cp, "big", "Admitted", ns)
        gangs = {g["name"]: g for g in status["plan"]["gangs"]}
        big = next(g for name, g in gangs.items() if name.startswith(f"Workload {ns}/job-big"))
        assert (big["met"], big["admitted"]) == (0, False)
        assert "all or none" in big["reason"]
        # The plan's change for the node, or, once applied (the pair runs on it), the GPU's
        # layout: a later pass plans no change there and lists no node.
        changes = status["plan"]["nodes"].get(f"{ns}-a")
        after = changes[0]["after"] if changes else layout_of(fleet, f"{ns}-a")
        assert "4g.40gb" not in after
        assert after.count("2g.20gb") >= 2
    finally:
        fleet.stop()
        for name in ("big", "pair"):
            cp.kubectl("delete", "job", "-n", ns, name, "--wait=false", check=False)
