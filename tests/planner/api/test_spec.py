"""The GPUPartitionPlan manifest model: what it accepts and the messages for what it doesn't."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from migplan.planner.api.spec import GPUPartitionPlan, LabelSelector, WindowSpec, duration_seconds
from migplan.planner.errors import MigplanInputError
from migplan.planner.schema import parse_model

GOOD = {
    "apiVersion": "migplan.io/v1alpha1",
    "kind": "GPUPartitionPlan",
    "metadata": {"name": "pool-a", "labels": {"team": "ml"}},
    "spec": {
        "nodeSelector": {"matchLabels": {"pool": "a"}},
        "demand": {"profiles": [{"resource": "nvidia.com/mig-1g.10gb", "count": 4}]},
        "window": {"start": "0 2 * * 6", "duration": "2h"},
    },
}
OFFER = {
    "name": "h100-8x",
    "gpuModel": "H100-80GB",
    "gpusPerNode": 8,
    "maxNodes": 4,
    "nodeSelector": {"karpenter.sh/nodepool": "gpu", "pool": "a"},
}


def parse(change=None) -> GPUPartitionPlan:
    doc = copy.deepcopy(GOOD)
    if change:
        change(doc)
    return parse_model(GPUPartitionPlan, doc, source="plan.yaml")


def test_defaults_are_safe() -> None:
    spec = parse().spec
    assert spec.policy.disruption.value == "none"
    assert spec.rollout.max_unavailable == 1
    assert spec.actuator is None  # the operator's default, agent unless set otherwise
    assert not spec.dry_run


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["spec"].pop("window"),
            "spec: window: a plan that changes GPUs needs a "
            "maintenance window (or set dryRun: true)",
        ),
        (lambda d: d["spec"]["window"].update(duration="0m"), "duration must be positive"),
        (lambda d: d["spec"]["window"].update(duration="2 hours"), "spec.window.duration"),
        (lambda d: d["spec"]["window"].update(start="0 25 * * *"), "is not a 5-field cron"),
        (lambda d: d["spec"]["window"].update(start="@daily"), "is not a 5-field cron"),
        (lambda d: d["spec"]["window"].update(timeZone="Mars/Olympus"), "unknown time zone"),
        (lambda d: d["spec"].update(rebalanceSchedule="every hour"), "spec.rebalanceSchedule"),
        (
            lambda d: d["spec"]["demand"]["profiles"][0].update(count=-1),
            "spec.demand.profiles[0].count",
        ),
        (
            lambda d: d["spec"]["demand"]["profiles"][0].update(resource="nvidia.com/gpu"),
            "spec.demand.profiles[0].resource",
        ),
        (lambda d: d["spec"]["demand"].update(profiles=[]), "give profiles, fromPendingPods"),
        (lambda d: d["spec"].update(policy={"disruption": "always"}), "spec.policy.disruption"),
        (lambda d: d["spec"].update(rollout={"maxUnavailable": 0}), "spec.rollout.maxUnavailable"),
        (
            lambda d: d["spec"].update(
                nodeSelector={"matchExpressions": [{"key": "a", "operator": "In"}]}
            ),
            "operator In needs at least one value",
        ),
        (lambda d: d["spec"].update(dryrun=True), "spec.dryrun: Extra inputs are not permitted"),
        (lambda d: d["metadata"].update(name="Pool_A"), "metadata.name"),
        (
            lambda d: d["spec"].update(scaleOut={"offers": [OFFER, OFFER]}),
            "offers: each name may appear only once",
        ),
        (
            lambda d: d["spec"].update(scaleOut={"offers": [{**OFFER, "nodeSelector": {}}]}),
            "spec.scaleOut.offers[0] (h100-8x).nodeSelector: Dictionary should have at least 1",
        ),
        (
            lambda d: d["spec"].update(scaleOut={"offers": [{**OFFER, "maxNodes": 65}]}),
            "spec.scaleOut.offers[0] (h100-8x).maxNodes: Input should be less than or equal to 64",
        ),
        (
            lambda d: d["spec"].update(
                scaleOut={"offers": [{**OFFER, "nodeSelector": {"karpenter.sh/nodepool": "g"}}]}
            ),
            "scaleOut.offers[0] (h100-8x): spec.nodeSelector does not select a node",
        ),
        (
            lambda d: d["spec"].update(
                scaleOut={
                    "offers": [
                        {**OFFER, "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}
                    ]
                }
            ),
            "operator Exists takes no value",
        ),
        (
            lambda d: d["spec"].update(
                scaleOut={"offers": [{**OFFER, "nodeSelector": {"bad key!": "x", "pool": "a"}}]}
            ),
            "'bad key!' is not a label key",
        ),
        (
            lambda d: d["spec"].update(scaleOut={"offers": [OFFER], "timeout": "0s"}),
            "duration must be positive",
        ),
        (lambda d: d.update(kind="Plan"), "kind"),
    ],
)
def test_bad_manifests_name_the_field(change, message) -> None:
    with pytest.raises(MigplanInputError) as caught:
        parse(change)
    assert str(caught.value).startswith("plan.yaml: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_dry_run_needs_no_window() -> None:
    def dry(d):
        d["spec"].pop("window")
        d["spec"]["dryRun"] = True

    assert parse(dry).spec.window is None


def test_durations() -> None:
    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("45s") == 45


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"a": "2"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"b": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"}, True),
    ],
)
def test_label_selectors(selector, labels, expected) -> None:
    assert LabelSelector.model_validate(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"start": "0 2 30 2 *", "duration": "2h"}, "never fires"),
        ({"start": "0 2 * * 6", "duration": "9000h"}, "longer than a year"),
        ({"start": "0 2 * * 6", "duration": "999999999h"}, "should match pattern"),
    ],
)
def test_windows_the_operator_could_never_evaluate_are_refused(window, message) -> None:
    # Accepted before, then every tick failed (CroniterBadDateError, OverflowError).
    with pytest.raises(ValidationError, match=message):
        WindowSpec.model_validate(window)


def test_a_leap_day_window_is_fine() -> None:
    assert WindowSpec.model_validate({"start": "0 2 29 2 *", "duration": "2h"})
