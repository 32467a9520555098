"""scripts/mutation's own judgement: which surviving mutants it calls equivalent without an
entry in equivalent.toml. A wrong rule would hide missing tests, so each is shown refusing
what it must not accept."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutation.py"


@pytest.fixture(scope="module")
def rules():
    spec = importlib.util.spec_from_file_location("migplan_mutation_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


SOURCE = """from __future__ import annotations


def pick(items: list[int] | None, *, limit: int = 5) -> int | None:
    table = {limit: items | None}
    return (items or [None])[:limit][0]
"""


def diff(line: int, before: str, after: str) -> str:
    return f"--- a\n+++ b\n@@ -{line},3 +{line},3 @@\n \n-{before}\n+{after}\n \n"


def test_a_changed_parameter_or_return_annotation_is_equivalent(rules) -> None:
    line = "def pick(items: list[int] | None, *, limit: int = 5) -> int | None:"
    for after in (
        "def pick(items: list[int] + None, *, limit: int = 5) -> int | None:",
        "def pick(items: list[int] | None, *, limit: int = 5) -> int - None:",
    ):
        assert rules.annotations_only(SOURCE, diff(3, line, after))


def test_a_changed_default_or_body_is_not(rules) -> None:
    line = "def pick(items: list[int] | None, *, limit: int = 5) -> int | None:"
    default = "def pick(items: list[int] | None, *, limit: int = 6) -> int | None:"
    assert not rules.annotations_only(SOURCE, diff(3, line, default))
    body = "    table = {limit: items | None}"
    # `name: a | b` inside a dict reads like an annotation on its own line; in the module
    # it is an expression, and changing it changes behaviour.
    assert not rules.annotations_only(SOURCE, diff(4, body, "    table = {limit: items + None}"))


def test_a_diff_that_does_not_match_the_source_is_not_judged(rules) -> None:
    assert rules.mutated_source(SOURCE, diff(4, "    something else", "    x")) is None
    assert not rules.annotations_only(SOURCE, diff(4, "    something else", "    x"))


def test_annotations_are_evaluated_without_the_future_import_or_under_typer(rules) -> None:
    line = "def pick(items: list[int] | None, *, limit: int = 5) -> int | None:"
    after = "def pick(items: list[int] + None, *, limit: int = 5) -> int | None:"
    eager = SOURCE.replace("from __future__ import annotations\n", "import os\n")
    assert not rules.annotations_only(eager, diff(3, line, after))
    typer = SOURCE.replace(
        "from __future__ import annotations\n", "from __future__ import annotations\nimport typer\n"
    )
    assert not rules.annotations_only(typer, diff(4, line, after))


def test_keyword_only_made_positional_only_is_equivalent_and_nothing_else(rules) -> None:
    assert rules.equivalent_by_rule("def f(a, *, b):", "def f(a, /, b):")
    assert not rules.equivalent_by_rule("def f(a, *, b):", "def f(a, *, c):")
