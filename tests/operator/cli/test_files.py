"""Reading YAML input: the event reader gives exactly what the full safe loader gives."""

from __future__ import annotations

import datetime
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from migplan.operator.cli.files import SAFE_LOADER, _documents_from_events, read_yaml_documents

ROOT = Path(__file__).resolve().parents[3]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["yes", "no", "on", "off", "~", "1_000", "0x1f", "1e3", "2024-01-15", ""]),
    st.dates(),
)
keys = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.sampled_from(["yes", "null", "1.5"]))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=25,
)


def full(text: str) -> list:
    return [doc for doc in yaml.load_all(text, Loader=SAFE_LOADER) if doc is not None]


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(documents, min_size=1, max_size=3), flow=st.booleans())
def test_the_event_reader_reads_what_the_full_loader_reads(docs, flow) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=True)
    assert _documents_from_events(text) == full(text)


def test_the_bundled_examples_read_the_same_both_ways() -> None:
    for path in sorted(ROOT.glob("examples/**/*.yaml")):
        text = path.read_text()
        assert _documents_from_events(text) == full(text), path


def test_anchors_tags_and_merge_keys_are_left_to_the_full_loader(tmp_path) -> None:
    text = "base: &b {a: 1}\nuse:\n  <<: *b\n  c: !!str 2\nwhen: 2024-01-15\n"
    assert _documents_from_events(text) is None
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    assert read_yaml_documents(path) == [
        {"base": {"a": 1}, "use": {"a": 1, "c": "2"}, "when": datetime.date(2024, 1, 15)}
    ]


def test_a_scalar_anchor_or_a_tagged_sequence_goes_to_the_full_loader() -> None:
    assert _documents_from_events("a: &x 1\nb: 2\n") is None
    assert _documents_from_events("a: !!seq [1]\n") is None
