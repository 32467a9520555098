"""DRA selectors through migplan-cel: Kubernetes' own CEL (k8s.io/dynamic-resource-allocation),
with its language, cost limits and parser limits; and the Python side's budget and caches."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from migplan.operator.dra.cel import Device, Quantity, SemVer
from migplan.operator.dra.helper import (
    RESULTS,
    Budget,
    BudgetSpent,
    CelUnavailable,
    CompileError,
    Evaluator,
    evaluator,
)

ROOT = Path(__file__).resolve().parents[3]

MIG = Device(
    driver="gpu.nvidia.com",
    attributes={
        "gpu.nvidia.com": {
            "type": "mig",
            "profile": "2g.20gb",
            "driverVersion": SemVer.parse("570.86.15"),
            "index": 0,
            "hasP2P": False,
        }
    },
    capacity={"gpu.nvidia.com": {"memory": Quantity.parse("20Gi")}},
)


LIST = "[" + ",".join(f"'{i:02d}'" for i in range(40)) + "]"


def selects(*selectors: str, device: Device = MIG) -> bool:
    return evaluator().match(selectors, [device], budget=Budget())[0].selected


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        ("device.driver == 'gpu.nvidia.com'", True),
        ("device.attributes['gpu.nvidia.com'].type == 'mig'", True),
        ("device.attributes['gpu.nvidia.com'].profile in ['1g.10gb', '2g.20gb']", True),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0", True),
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('20Gi'))", False),
        ("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('21474836481'))", True),
        (
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].driverVersion.major() == 570", True),
        ("device.attributes['gpu.nvidia.com'].index + 1 == 1", True),
        ("!device.attributes['gpu.nvidia.com'].hasP2P", True),
        ("!device.allowMultipleAllocations", True),
        ("'gpu.nvidia.com' in device.attributes", True),
        # Optional types, as Kubernetes enables them (cel-python could not parse these).
        ("device.attributes['gpu.nvidia.com'].?profile.orValue('') == '2g.20gb'", True),
        ("device.attributes['gpu.nvidia.com'].?pcieRoot.orValue('none') == 'none'", True),
        ("device.attributes['example.com'].?x.hasValue()", False),
        # Sixty nested parentheses: cel-go's cost 0 (cel-python hit Python's recursion limit).
        ("(" * 60 + "device.driver == 'gpu.nvidia.com'" + ")" * 60, True),
    ],
)
def test_selectors_as_the_scheduler_evaluates_them(expression: str, selected: bool) -> None:
    assert selects(expression) is selected


def test_a_missing_attribute_selects_nothing_and_says_why() -> None:
    outcome = evaluator().match(
        ["device.attributes['gpu.nvidia.com'].pcieRoot == 'x'"], [MIG], budget=Budget()
    )[0]
    assert not outcome.selected
    assert "pcieRoot" in outcome.error


def test_a_non_boolean_result_does_not_compile() -> None:
    # Kubernetes' environment declares selectors as bool: a string result is refused.
    with pytest.raises(CompileError, match="bool"):
        selects("device.driver")


def test_every_selector_must_select() -> None:
    both = (
        "device.driver == 'gpu.nvidia.com'",
        "device.attributes['gpu.nvidia.com'].type == 'gpu'",
    )
    assert not selects(*both)
    assert selects(both[0])


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("device.driver ==", "Syntax error"),
        ("(" * 300 + "true" + ")" * 300, "recursion limit"),
        ("x" * (10 * 1024 + 1), "longer than 10240 characters"),
        # Estimated over the API server's limit of 1,000,000: refused before it runs.
        (
            LIST + ".all(a, " + LIST + ".all(b, " + LIST + ".all(c, " + LIST + ".all(d, a != d))))",
            "estimated cost",
        ),
    ],
)
def test_what_the_api_server_refuses_does_not_compile(expression: str, why: str) -> None:
    with pytest.raises(CompileError, match=why):
        selects(expression)


COSTLY = f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a + b + c != '')))"
"""Three nested `.all()` over 40-element lists: the selector that took cel-python 9-15 s."""


def test_a_costly_selector_costs_what_cel_go_says_not_seconds() -> None:
    found = Evaluator()
    try:
        budget = Budget(seconds=20)
        assert found.match([COSTLY], [MIG], budget=budget)[0].selected
        assert budget.left() > 15
    finally:
        found.close()


def test_the_pass_budget_interrupts_evaluation() -> None:
    found = Evaluator()
    devices = [
        Device(driver="gpu.nvidia.com", attributes={"gpu.nvidia.com": {"index": i}})
        for i in range(5000)
    ]
    try:
        with pytest.raises(BudgetSpent, match="spent"):
            found.match([COSTLY], devices, budget=Budget(seconds=0.2))
        with pytest.raises(BudgetSpent):
            found.match(["true"], [MIG], budget=Budget(seconds=0))
        # The helper is still usable afterwards.
        assert found.match(["true"], [MIG], budget=Budget())[0].selected
    finally:
        found.close()


def test_results_are_cached_per_selectors_and_device_within_a_bound() -> None:
    found = Evaluator()
    try:
        first = found.match(
            ["device.attributes['gpu.nvidia.com'].index >= 0"], [MIG], budget=Budget()
        )
        found.close()  # a cached answer needs no helper
        again = found.match(
            ["device.attributes['gpu.nvidia.com'].index >= 0"], [MIG], budget=Budget()
        )
        assert first == again
        devices = [
            Device(driver="gpu.nvidia.com", attributes={"gpu.nvidia.com": {"index": i}})
            for i in range(RESULTS + 10)
        ]
        found.match(["device.attributes['gpu.nvidia.com'].index >= 0"], devices, budget=Budget())
        assert len(found._results) == RESULTS
    finally:
        found.close()


def test_a_helper_that_died_is_started_again() -> None:
    found = Evaluator()
    try:
        assert found.match(["true"], [MIG], budget=Budget())[0].selected
        assert found._proc is not None
        found._proc.kill()
        found._proc.wait()
        assert found.match(["false || true"], [MIG], budget=Budget())[0].selected
    finally:
        found.close()


def test_a_missing_helper_says_how_to_build_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MIGPLAN_CEL", str(tmp_path / "absent"))
    found = Evaluator()
    with pytest.raises(CelUnavailable, match="cannot start"):
        found.match(["true"], [MIG], budget=Budget())


def test_the_helper_is_built_from_the_control_planes_release() -> None:
    # The same DRA CEL package as the kube-scheduler the cluster tests run.
    versions = evaluator().versions()
    pinned = re.search(
        r"^KUBERNETES_VERSION=v1\.(\d+\.\d+)$",
        (ROOT / "tests" / "cluster" / "versions.env").read_text(),
        re.MULTILINE,
    )
    assert pinned is not None
    assert versions["k8s.io/dynamic-resource-allocation"] == f"v0.{pinned.group(1)}"
    assert versions["github.com/google/cel-go"].startswith("v0.")


def test_devices_are_sent_as_a_resource_slice_publishes_them() -> None:
    assert json.loads(json.dumps(MIG.published())) == {
        "driver": "gpu.nvidia.com",
        "allowMultipleAllocations": False,
        "attributes": {
            "gpu.nvidia.com/driverVersion": {"version": "570.86.15"},
            "gpu.nvidia.com/hasP2P": {"bool": False},
            "gpu.nvidia.com/index": {"int": 0},
            "gpu.nvidia.com/profile": {"string": "2g.20gb"},
            "gpu.nvidia.com/type": {"string": "mig"},
        },
        "capacity": {"gpu.nvidia.com/memory": {"value": "21474836480"}},
    }


@pytest.mark.parametrize(
    ("published", "selector", "selected"),
    [
        ("1.0.0-rc.10", "isGreaterThan(semver('1.0.0-rc.9'))", True),
        ("1.0.0-rc.9", "isLessThan(semver('1.0.0-rc.10'))", True),
        ("1.0.0-rc.10", "isLessThan(semver('1.0.0'))", True),
        ("1.10.0", "isGreaterThan(semver('1.9.0'))", True),
    ],
)
def test_versions_order_as_kubernetes_semver_orders_them(
    published: str, selector: str, selected: bool
) -> None:
    device = Device(
        driver="gpu.nvidia.com",
        attributes={"gpu.nvidia.com": {"driverVersion": SemVer.parse(published)}},
    )
    expression = f"device.attributes['gpu.nvidia.com'].driverVersion.{selector}"
    assert selects(expression, device=device) is selected


def test_compiled_selectors_are_held_within_a_memory_bound() -> None:
    # #29 row 7: cel-python's compile cache grew ~4 MiB per 10 KiB selector, past the
    # operator's 1 GiB. The helper keeps 128 compiled selectors: 600 distinct ones of ~10 KiB
    # leave it under 160 MiB (~95 MiB measured; ~300 MiB with an unbounded cache).
    found = Evaluator()
    try:
        for n in range(600):
            names = " || ".join(f"device.driver == 'x{n}-{i:04d}.example.com'" for i in range(230))
            assert 9 * 1024 < len(names) <= 10 * 1024
            found.match([names], [MIG], budget=Budget())
        assert found._proc is not None
        status = Path(f"/proc/{found._proc.pid}/status").read_text()
        peak_kib = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM"))
        assert peak_kib < 160 * 1024, peak_kib
    finally:
        found.close()
