"""DRA objects the DRA tests and the DRA benchmark share: NVIDIA's MIG DeviceClass, claims
and claim templates for one MIG device of a profile, pods that use them, and pod checks."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from nodes import KWOK_TOLERATION

MIG_CLASS = next(
    doc
    for doc in yaml.safe_load_all(
        (Path(__file__).resolve().parents[2] / "examples" / "dra" / "claim.yaml").read_text()
    )
    if doc["kind"] == "DeviceClass"
)
"""NVIDIA's MIG DeviceClass as the DRA example ships it (the example is what the tests apply)."""


def device_spec(profile: str, *, count: int = 1) -> dict:
    """`spec` of a claim for `count` MIG devices of `profile`."""
    return {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "mig.nvidia.com",
                        "count": count,
                        "selectors": [
                            {
                                "cel": {
                                    "expression": "device.attributes['gpu.nvidia.com']"
                                    f".profile == '{profile}'"
                                }
                            }
                        ],
                    },
                }
            ]
        }
    }


def claim(name: str, profile: str, *, namespace: str, count: int = 1) -> dict:
    """A ResourceClaim for `count` MIG devices of `profile`."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": device_spec(profile, count=count),
    }


def claim_template(name: str, profile: str, *, namespace: str) -> dict:
    """A ResourceClaimTemplate for one MIG device of `profile`."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": device_spec(profile)},
    }


def claim_pod(
    name: str,
    *,
    namespace: str,
    claim_name: str | None = None,
    template: str | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: tuple[dict, ...] = (),
) -> dict:
    """A pod using one claim (by name) or one made from `template`."""
    ref = {"name": "gpu"}
    if claim_name:
        ref["resourceClaimName"] = claim_name
    if template:
        ref["resourceClaimTemplateName"] = template
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": node_selector or {},
            "tolerations": [KWOK_TOLERATION, *tolerations],
            "resourceClaims": [ref],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/cuda:latest",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def claim_and_pod(
    name: str,
    profile: str,
    *,
    namespace: str,
    node_selector: dict[str, str],
    tolerations: tuple[dict, ...] = (),
    count: int = 1,
) -> list[dict]:
    """A ResourceClaim `name` for `count` MIG devices of `profile` and a pod `name` using it."""
    return [
        claim(name, profile, namespace=namespace, count=count),
        claim_pod(
            name,
            namespace=namespace,
            claim_name=name,
            node_selector=node_selector,
            tolerations=tolerations,
        ),
    ]


def pod_phase(cp, name: str, *, namespace: str) -> str | None:
    found = cp.kubectl("get", "pod", "-n", namespace, name, "-o", "json", check=False)
    return json.loads(found.stdout)["status"].get("phase") if found.returncode == 0 else None


def unschedulable(cp, name: str, *, namespace: str) -> bool:
    """Whether the scheduler turned the pod away."""
    found = json.loads(cp.kubectl("get", "pod", "-n", namespace, name, "-o", "json").stdout)
    return any(
        c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in found["status"].get("conditions", [])
    )


def allocated_device(cp, pod: str, *, namespace: str) -> str:
    """The device the pod's (only) claim was allocated."""
    body = json.loads(cp.kubectl("get", "pod", "-n", namespace, pod, "-o", "json").stdout)
    statuses = body["status"].get("resourceClaimStatuses") or []
    name = (
        statuses[0]["resourceClaimName"]
        if statuses
        else body["spec"]["resourceClaims"][0]["resourceClaimName"]
    )
    found = json.loads(
        cp.kubectl("get", "resourceclaim", "-n", namespace, name, "-o", "json").stdout
    )
    (result,) = found["status"]["allocation"]["devices"]["results"]
    return result["device"]
