"""Preflight rules: what refuses a node, what only warns, and what each finding tells."""

from __future__ import annotations

import pytest

from migplan.operator.gpu_operator import (
    AGENT_OWNED,
    DISABLED_BY_MIGPLAN,
    MIG_CONFIG_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    GpuOperatorSettings,
)
from migplan.operator.preflight.checks import (
    ClusterFacts,
    Finding,
    NodeFacts,
    Severity,
    blocked_nodes,
    preflight,
    summary,
    worst,
)
from migplan.planner.api.spec import Actuator

SETTINGS = GpuOperatorSettings()
MIXED = {"nvidia.com/mig.strategy": "mixed"}
HEALTHY = frozenset({"device-plugin", "gpu-feature-discovery"})
REPORTED = {"phase": "Applied", "gpus": [{"index": 0, "layout": "-"}], "conditions": []}


def node(name: str = "n1", *, labels=None, components=HEALTHY, partition=REPORTED, **kw):
    return NodeFacts(
        name=name,
        labels={**MIXED, **(labels or {})},
        components=components,
        partition=partition,
        **kw,
    )


def live(*nodes: NodeFacts, policy=None) -> ClusterFacts:
    return ClusterFacts(nodes=nodes, live=True, cluster_policy=policy or {"cdi": {}})


def findings(facts: ClusterFacts, actuator: Actuator = Actuator.AGENT):
    return preflight(facts, actuator=actuator, settings=SETTINGS)


def by_check(found, check: str):
    return [f for f in found if f.check == check]


def test_a_healthy_node_passes_every_check() -> None:
    found = findings(live(node()))
    assert {f.severity for f in found} == {Severity.OK}
    assert summary(found) == (True, "Passed", "1 nodes checked: nothing in the way")


@pytest.mark.parametrize("strategy", ["single", "none"])
def test_a_strategy_other_than_mixed_refuses_the_node_with_the_helm_fix(strategy: str) -> None:
    found = findings(live(node(labels={"nvidia.com/mig.strategy": strategy}), node("n2")))
    (finding,) = by_check(found, "MigStrategy")[:1]
    assert finding.severity is Severity.BLOCKING
    assert f"MIG strategy {strategy}" in finding.message
    assert "--set mig.strategy=mixed" in finding.fix
    assert blocked_nodes(found) == {"n1": finding.message}
    passed, reason, message = summary(found)
    assert (passed, reason) == (False, "MigStrategy")
    assert message.startswith("1 of 2 nodes refused: n1: MIG strategy")


def test_no_strategy_label_warns_but_does_not_refuse() -> None:
    facts = ClusterFacts(nodes=(NodeFacts(name="n1", labels={}),), live=False)
    found = findings(facts)
    assert [f.severity for f in found] == [Severity.WARNING]
    assert blocked_nodes(found) == {}
    assert summary(found)[:2] == (True, "Warnings")


def test_an_unknown_strategy_value_is_named_not_called_missing() -> None:
    labels = {"nvidia.com/mig.strategy": "mixd\x1b[2J"}
    facts = ClusterFacts(nodes=(NodeFacts(name="n1", labels=labels),), live=False)
    (finding,) = findings(facts)
    assert finding.severity is Severity.WARNING
    assert "no nvidia.com/mig.strategy label" not in finding.message
    assert "nvidia.com/mig.strategy='mixd\\x1b[2J' is no MIG strategy" in finding.message
    assert "\x1b" not in finding.message


def test_offline_only_labels_are_checked() -> None:
    facts = ClusterFacts(nodes=(NodeFacts(name="n1", labels=MIXED),), live=False)
    assert [f.check for f in findings(facts)] == ["MigStrategy"]


def test_mig_manager_on_an_agent_node_is_a_note_migplan_acts_on() -> None:
    found = findings(live(node(components=HEALTHY | {"mig-manager"})))
    (finding,) = by_check(found, "MigManager")
    assert finding.severity is Severity.INFO
    assert f"{MIG_MANAGER_DEPLOY_LABEL}=false" in finding.message


def test_a_node_migplan_fenced_is_ok_for_the_agent() -> None:
    labels = {MIG_MANAGER_DEPLOY_LABEL: "false", MIG_CONFIG_LABEL: AGENT_OWNED}
    (finding,) = by_check(findings(live(node(labels=labels))), "MigManager")
    assert finding.severity is Severity.OK
    assert "kept off this node by migplan" in finding.message


def test_the_mig_manager_actuator_needs_mig_manager_on_the_node() -> None:
    found = findings(live(node()), Actuator.MIG_MANAGER)
    (finding,) = by_check(found, "MigManager")
    assert finding.severity is Severity.BLOCKING
    assert "nobody would apply the configs migplan writes" in finding.message
    assert "migManager.enabled=true" in finding.fix
    # ... unless migplan turned it off there itself (it turns it back on when handing over).
    fenced = node(
        labels={MIG_MANAGER_DEPLOY_LABEL: "false"}, annotations={DISABLED_BY_MIGPLAN: "true"}
    )
    (finding,) = by_check(findings(live(fenced), Actuator.MIG_MANAGER), "MigManager")
    assert finding.severity is Severity.INFO


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({MIG_MANAGER_DEPLOY_LABEL: "false"}, {}),  # fenced by someone else
        ({}, {DISABLED_BY_MIGPLAN: "true"}),  # migplan's mark, but not fenced now
    ],
)
def test_mig_manager_fenced_by_someone_else_still_refuses_the_mig_manager_actuator(
    labels, annotations
) -> None:
    # #35: taking another owner's fence for migplan's turned BLOCKING into INFO unnoticed.
    fenced = node(labels=labels, annotations=annotations)
    (finding,) = by_check(findings(live(fenced), Actuator.MIG_MANAGER), "MigManager")
    assert finding.severity is Severity.BLOCKING


def test_an_agent_node_fenced_by_someone_else_is_not_called_migplans() -> None:
    labels = {MIG_MANAGER_DEPLOY_LABEL: "false", MIG_CONFIG_LABEL: "all-1g.10gb"}
    (finding,) = by_check(findings(live(node(labels=labels))), "MigManager")
    assert (finding.severity, finding.message) == (Severity.OK, "mig-manager does not run here")


@pytest.mark.parametrize(
    ("config", "severity", "owner"),
    [
        ("migplan-abc", Severity.OK, "migplan's"),
        (None, Severity.OK, "not migplan's"),
        ("all-1g.10gb", Severity.INFO, "not migplan's"),
    ],
)
def test_the_mig_manager_actuator_says_whose_config_the_node_has(config, severity, owner) -> None:
    labels = {MIG_CONFIG_LABEL: config} if config else {}
    running = node(labels=labels, components=HEALTHY | {"mig-manager"})
    (finding,) = by_check(findings(live(running), Actuator.MIG_MANAGER), "MigManager")
    assert finding.severity is severity
    assert finding.message.startswith(f"{MIG_CONFIG_LABEL}={config or '(unset)'} ({owner});")


def test_missing_components_warn_with_where_to_look() -> None:
    found = findings(live(node(components=frozenset())))
    plugin, gfd = by_check(found, "DevicePlugin") + by_check(found, "FeatureDiscovery")
    assert plugin.severity is gfd.severity is Severity.WARNING
    assert "would not be advertised" in plugin.message
    assert "--gpu-operator-namespace" in plugin.fix


def test_an_agent_that_cannot_load_nvml_refuses_the_node() -> None:
    partition = {
        "phase": "NvmlUnavailable",
        "gpus": [],
        "conditions": [
            {"type": "NvmlReady", "status": "False", "message": "nvmlInit failed"},
        ],
    }
    found = findings(live(node(partition=partition)))
    (finding,) = by_check(found, "Nvml")
    assert finding.severity is Severity.BLOCKING
    assert "runtimeClassName: nvidia" in finding.fix


def test_an_agent_that_has_not_reported_warns() -> None:
    (finding,) = by_check(findings(live(node(partition=None))), "Agent")
    assert finding.severity is Severity.WARNING
    assert "--field-selector spec.nodeName=n1" in finding.fix


def test_profiles_that_differ_from_nvml_warn() -> None:
    partition = {
        **REPORTED,
        "conditions": [{"type": "ProfilesMatch", "status": "False", "message": "3g.71gb: ..."}],
    }
    (finding,) = by_check(findings(live(node(partition=partition))), "Profiles")
    assert finding.severity is Severity.WARNING


def test_cdi_mode_is_read_from_the_cluster_policy() -> None:
    on = by_check(findings(live(node(), policy={"cdi": {"enabled": True}})), "Cdi")[0]
    assert on.severity is Severity.INFO
    assert "--cdi-command" in on.fix
    none = by_check(
        preflight(ClusterFacts(nodes=(), live=True), actuator=Actuator.AGENT, settings=SETTINGS),
        "Cdi",
    )[0]
    assert "no GPU Operator ClusterPolicy" in none.message


def label(value: str) -> str:
    """`value` as a new string object, as a label read from the API is: never the literal
    the code compares with (an `is` where `==` belongs must fail)."""
    return "".join(list(value))


@pytest.mark.parametrize(
    ("strategy", "seen"),
    [
        (
            "single",
            "as nvidia.com/gpu, so pods asking for nvidia.com/mig-* never see what migplan makes",
        ),
        ("none", "not at all"),
    ],
)
def test_each_refused_strategy_says_how_instances_would_be_advertised(strategy, seen) -> None:
    labels = {"nvidia.com/mig.strategy": label(strategy)}
    (finding,) = by_check(findings(live(node(labels=labels))), "MigStrategy")
    assert finding.message == (
        f"MIG strategy {strategy}: the device plugin advertises MIG instances {seen}; "
        "migplan changes nothing on this node"
    )


def test_mixed_read_from_the_api_is_ok() -> None:
    (finding,) = by_check(
        findings(live(node(labels={"nvidia.com/mig.strategy": label("mixed")}))), "MigStrategy"
    )
    assert finding.severity is Severity.OK


def test_an_unknown_strategy_is_shown_cut_to_63_characters() -> None:
    value = "x" * 70
    facts = ClusterFacts(
        nodes=(NodeFacts(name="n1", labels={"nvidia.com/mig.strategy": value}),), live=False
    )
    (finding,) = findings(facts)
    assert f"='{'x' * 63}' is no MIG strategy" in finding.message


def test_fenced_only_by_the_exact_label_value() -> None:
    fence = {MIG_MANAGER_DEPLOY_LABEL: label("false"), MIG_CONFIG_LABEL: label(AGENT_OWNED)}
    (finding,) = by_check(findings(live(node(labels=fence))), "MigManager")
    assert finding.severity is Severity.OK
    assert finding.message.startswith("kept off this node by migplan")
    # A config that merely sorts after migplan's own is someone else's.
    other = {MIG_MANAGER_DEPLOY_LABEL: "false", MIG_CONFIG_LABEL: AGENT_OWNED + "-x"}
    (finding,) = by_check(findings(live(node(labels=other))), "MigManager")
    assert finding.message == "mig-manager does not run here"


def test_mig_manager_running_on_an_agent_node_names_its_config_or_none() -> None:
    running = HEALTHY | {"mig-manager"}
    (unset,) = by_check(findings(live(node(components=running))), "MigManager")
    assert f"applies {MIG_CONFIG_LABEL}=(unset) each time it starts" in unset.message
    labels = {MIG_CONFIG_LABEL: "all-1g.10gb"}
    (named,) = by_check(findings(live(node(components=running, labels=labels))), "MigManager")
    assert f"applies {MIG_CONFIG_LABEL}=all-1g.10gb each time it starts" in named.message


def test_a_node_migplan_fenced_for_its_agent_is_a_note_under_mig_manager() -> None:
    fenced = node(
        labels={MIG_MANAGER_DEPLOY_LABEL: "false"}, annotations={DISABLED_BY_MIGPLAN: "t"}
    )
    (finding,) = by_check(findings(live(fenced), Actuator.MIG_MANAGER), "MigManager")
    assert finding.message == (
        "migplan turned mig-manager off here for its agent; it turns it back on when it "
        "hands this node to mig-manager"
    )


def test_components_that_run_are_named() -> None:
    found = findings(live(node()))
    assert [f.message for f in by_check(found, "DevicePlugin")] == ["device-plugin runs here"]
    assert [f.message for f in by_check(found, "FeatureDiscovery")] == [
        "gpu-feature-discovery runs here"
    ]


def test_only_the_named_condition_is_read() -> None:
    """Other conditions of the agent (sorting before or after the one asked for) are not
    taken for NvmlReady or ProfilesMatch."""
    unreported = {
        "gpus": [],
        "conditions": [
            {"type": "Applied", "status": "False", "message": "a"},
            {"type": "Ready", "status": "False", "message": "r"},
            {"type": "NvmlReady", "status": "True", "message": "ok"},
        ],
    }
    found = findings(live(node(partition=unreported)))
    assert by_check(found, "Nvml") == []
    assert [f.severity for f in by_check(found, "Agent")] == [Severity.WARNING]
    reported = {
        **REPORTED,
        "conditions": [
            {"type": "Applied", "status": "False", "message": "a"},
            {"type": "Ready", "status": "False", "message": "r"},
            {"type": "ProfilesMatch", "status": "True", "message": "ok"},
        ],
    }
    assert by_check(findings(live(node(partition=reported))), "Profiles") == []


def test_nvml_and_profile_findings_quote_the_agent() -> None:
    nvml = {"gpus": [], "conditions": [{"type": "NvmlReady", "status": "False", "message": "m1"}]}
    (finding,) = by_check(findings(live(node(partition=nvml))), "Nvml")
    assert finding.message == "the agent cannot use NVML: m1"
    profiles = {
        **REPORTED,
        "conditions": [{"type": "ProfilesMatch", "status": "False", "message": "m2"}],
    }
    (finding,) = by_check(findings(live(node(partition=profiles))), "Profiles")
    assert finding.message == "NVML's profiles differ from migplan's catalog: m2"
    (agent,) = by_check(findings(live(node())), "Agent")
    assert agent.message == "reports phase Applied"


def test_cdi_off_is_ok_and_offline_says_nothing_of_cdi() -> None:
    (off,) = by_check(findings(live(node(), policy={"cdi": {"enabled": False}})), "Cdi")
    assert (off.severity, off.message) == (Severity.OK, "CDI is off in the ClusterPolicy")
    offline = ClusterFacts(nodes=(node(),), live=False, cluster_policy={"cdi": {}})
    assert by_check(findings(offline), "Cdi") == []


def refused(name: str, check: str = "MigStrategy"):
    return Finding(check, Severity.BLOCKING, f"{name} is refused", node=name)


def warned(name: str):
    return Finding("Agent", Severity.WARNING, f"{name} warns", node=name)


@pytest.mark.parametrize(
    ("count", "tail"),
    [(5, ""), (6, "; and 1 more"), (8, "; and 3 more"), (12, "; and 7 more")],
)
def test_the_summary_lists_five_refusals_and_counts_the_rest(count, tail) -> None:
    found = [refused(f"n{i}") for i in range(count)]
    passed, reason, message = summary(found)
    shown = "; ".join(f"n{i}: n{i} is refused" for i in range(5))
    assert (passed, reason) == (False, "MigStrategy")
    assert message == f"{count} of {count} nodes refused: {shown}{tail}"


def test_the_summary_names_one_check_or_says_several_and_counts_warnings() -> None:
    found = [refused("a"), refused("b", "Nvml"), warned("c")]
    assert summary(found) == (
        False,
        "Several",
        "2 of 3 nodes refused: a: a is refused; b: b is refused (and 1 warnings)",
    )
    assert (
        summary([refused("a"), refused("b")])[2]
        == "2 of 2 nodes refused: a: a is refused; b: b is refused"
    )
    assert summary([warned("c")]) == (
        True,
        "Warnings",
        "1 nodes checked, 1 warnings: c: c warns",
    )


def test_a_cluster_wide_refusal_blocks_no_node_by_name() -> None:
    cluster = Finding("Cdi", Severity.BLOCKING, "cluster-wide")
    assert blocked_nodes([cluster, refused("a")]) == {"a": "a is refused"}
    assert worst([warned("a"), cluster]) is Severity.BLOCKING
    assert worst([warned("a")]) is Severity.WARNING
    assert worst([]) is Severity.OK


def test_conditions_read_from_the_api_are_matched_by_value() -> None:
    """Types and statuses parsed from JSON are new string objects."""
    nvml = {
        "gpus": [],
        "conditions": [{"type": label("NvmlReady"), "status": label("False"), "message": "m"}],
    }
    assert [f.severity for f in by_check(findings(live(node(partition=nvml))), "Nvml")] == [
        Severity.BLOCKING
    ]
    profiles = {
        **REPORTED,
        "conditions": [{"type": label("ProfilesMatch"), "status": label("False"), "message": "m"}],
    }
    assert len(by_check(findings(live(node(partition=profiles))), "Profiles")) == 1
