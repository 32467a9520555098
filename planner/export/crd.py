"""CustomResourceDefinitions generated from the pydantic models, so the two cannot drift.

`crds/` holds the rendered YAML; a test renders again and compares. What a schema cannot say
is added as CEL rules (x-kubernetes-validations) next to the fields they concern; the API
server enforces both.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from migplan.planner.api.group import (
    GROUP,
    NODE_PARTITION_KIND,
    NODE_PARTITIONS,
    PLAN_KIND,
    PLANS,
    VERSION,
)
from migplan.planner.api.nodepartition import NodePartitionSpec, NodePartitionStatus
from migplan.planner.api.spec import PlanSpec
from migplan.planner.status import PlanStatus

CRON_RULE = r"^\s*([0-9A-Za-z*/,?#-]+\s+){4}[0-9A-Za-z*/,?#-]+\s*$"
PROFILE_RULE = r"^[1-9][0-9]*g\.[0-9]+gb(\+me\.all|\+me|\+gfx|-me)?$"
_DROP = {"title", "default", "examples", "propertyNames"}

Schema = dict[str, Any]


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Resolve $ref, collapse Optional (anyOf with null) and drop keys CRDs do not take."""
    if isinstance(node, list):
        return [_inline(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline(merged, defs)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            return _inline({**options[0], **rest}, defs)
    out: Schema = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "exclusiveMinimum":  # JSON Schema 2020 number -> OpenAPI v3.0 boolean
            out["minimum"] = value
            out["exclusiveMinimum"] = True
            continue
        out[key] = _inline(value, defs)
    if out.get("type") == "object" and "properties" in out:
        out.pop("additionalProperties", None)  # structural schemas prune unknown fields
    if out.get("additionalProperties") is True:  # dict[str, Any]: kept as it is written
        del out["additionalProperties"]
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("type") == "array" and "maxItems" not in out and "items" in out:
        out.pop("uniqueItems", None)
    return out


def openapi(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema of `model` (camelCase field names)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _inline(raw, raw.get("$defs", {}))  # type: ignore[no-any-return]


def _rule(rule: str, message: str, field_path: str | None = None) -> Schema:
    found: Schema = {"rule": rule, "message": message}
    if field_path:
        found["fieldPath"] = field_path
    return found


def _add_rules(schema: Schema, path: list[str], *rules: Schema) -> None:
    node = schema
    for key in path:
        node = node["properties"][key] if key != "[]" else node["items"]
    node.setdefault("x-kubernetes-validations", []).extend(rules)


def plan_spec_schema() -> Schema:
    """GPUPartitionPlan.spec with the CEL rules the schema alone cannot express."""
    spec = openapi(PlanSpec)
    _add_rules(
        spec,
        [],
        _rule(
            "(has(self.dryRun) && self.dryRun) || has(self.window)",
            "a plan that changes GPUs needs a maintenance window (spec.window), or set "
            "spec.dryRun: true",
            ".window",
        ),
    )
    _add_rules(
        spec,
        ["window", "duration"],
        _rule("self.matches('[1-9]')", "window.duration must be longer than zero, e.g. 2h or 90m"),
    )
    for path in (["window", "start"], ["rebalanceSchedule"]):
        _add_rules(
            spec,
            path,
            _rule(
                f"self.matches('{_cel_escape(CRON_RULE)}')",
                f"{'.'.join(path)} must be a 5-field cron expression such as '0 2 * * 6'",
            ),
        )
    _add_rules(
        spec,
        ["rollout", "drainTimeout"],
        _rule("self.matches('[1-9]')", "rollout.drainTimeout must be longer than zero, e.g. 10m"),
    )
    _add_rules(
        spec,
        ["demand"],
        _rule(
            "(has(self.profiles) && size(self.profiles) > 0) || has(self.fromPendingPods)"
            " || has(self.fromKueue)",
            "demand needs profiles, fromPendingPods, fromKueue, or several",
        ),
    )
    profiles = spec["properties"]["demand"]["properties"]["profiles"]
    profiles["x-kubernetes-list-type"] = "map"  # each resource once, enforced by the schema
    profiles["x-kubernetes-list-map-keys"] = ["resource"]
    requirement = ["nodeSelector", "matchExpressions", "[]"]
    _add_rules(
        spec,
        requirement,
        _rule(
            "self.operator in ['Exists', 'DoesNotExist'] ? !has(self.values) || size(self.values)"
            " == 0 : has(self.values) && size(self.values) > 0",
            "In and NotIn need values; Exists and DoesNotExist take none",
        ),
    )
    return spec


def _cel_escape(pattern: str) -> str:
    return pattern.replace("\\", "\\\\").replace("'", "\\'")


def _status(model: type[BaseModel]) -> Schema:
    schema = openapi(model)
    schema["x-kubernetes-preserve-unknown-fields"] = True
    conditions = schema["properties"]["conditions"]
    # API conventions: conditions are a map keyed by type (one of each; server-side apply
    # merges them by type), each stamped when its status last changed.
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    conditions["items"]["properties"]["lastTransitionTime"]["format"] = "date-time"
    return schema


def _crd(
    *,
    kind: str,
    plural: str,
    short: list[str],
    spec: Schema,
    status: Schema,
    columns: list[Schema],
    description: str,
) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["migplan"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def plan_crd() -> Schema:
    """The GPUPartitionPlan CRD."""
    return _crd(
        kind=PLAN_KIND,
        plural=PLANS,
        short=["gpp"],
        spec=plan_spec_schema(),
        status=_status(PlanStatus),
        description="A MIG partition plan: which GPUs, what demand, what may be disrupted "
        "and when. See README.md (GPUPartitionPlan reference).",
        columns=[
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {
                "name": "Nodes",
                "type": "integer",
                "jsonPath": ".status.nodes",
                "description": "nodes the plan changes",
            },
            {"name": "Demand-Met", "type": "string", "jsonPath": ".status.demandMet"},
            {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
            {"name": "Next-Window", "type": "string", "jsonPath": ".status.nextWindow"},
            {
                "name": "Window",
                "type": "string",
                "jsonPath": ".spec.window.start",
                "priority": 1,
            },
            {"name": "Dry-Run", "type": "boolean", "jsonPath": ".spec.dryRun", "priority": 1},
            {
                "name": "Preflight",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Preflight")].reason',
                "description": "Passed, Warnings, or the check that refused a node",
                "priority": 1,
            },
            {
                "name": "Scale-Out",
                "type": "string",
                "jsonPath": ".status.scaleOut.message",
                "description": "nodes asked of the autoscaler and not yet joined (spec.scaleOut)",
                "priority": 1,
            },
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    )


def node_partition_crd() -> Schema:
    """The NodePartition CRD."""
    return _crd(
        kind=NODE_PARTITION_KIND,
        plural=NODE_PARTITIONS,
        short=["np"],
        spec=openapi(NodePartitionSpec),
        status=_status(NodePartitionStatus),
        description="Desired and observed MIG layouts of one GPU node (named after the node).",
        columns=[
            {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName"},
            {"name": "GPUs", "type": "integer", "jsonPath": ".status.gpuCount"},
            {"name": "Plan", "type": "string", "jsonPath": ".spec.plan", "priority": 1},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Applied", "type": "integer", "jsonPath": ".status.appliedGeneration"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    )


def all_crds() -> dict[str, Schema]:
    """File name in crds/ -> CRD."""
    return {
        f"{GROUP}_{PLANS}.yaml": copy.deepcopy(plan_crd()),
        f"{GROUP}_{NODE_PARTITIONS}.yaml": copy.deepcopy(node_partition_crd()),
    }
