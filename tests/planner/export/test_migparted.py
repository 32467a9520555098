"""mig-parted entry names: valid label values for every node name, owned by one node only."""

from __future__ import annotations

import re

from hypothesis import assume, given
from hypothesis import strategies as st

from migplan.planner.export.migparted import config_name, node_config, owned_by

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
NODE = st.lists(DNS_LABEL, min_size=1, max_size=4).map(".".join).filter(lambda n: len(n) <= 253)
ENTRIES = node_config({0: "3g.40gb@0+3g.40gb@4", 1: "7g.80gb@0"})


@given(NODE)
def test_names_are_label_values_for_any_node_name(node: str) -> None:
    for name in (config_name(node, ENTRIES), config_name(node)):
        assert len(name) <= 63
        assert LABEL_VALUE.match(name)
    assert owned_by(config_name(node, ENTRIES), node)


@given(NODE, NODE)
def test_an_entry_belongs_to_its_node_only(node: str, other: str) -> None:
    assume(node != other)
    assert not owned_by(config_name(node, ENTRIES), other)
    assert config_name(node, ENTRIES) != config_name(other, ENTRIES)


def test_a_node_name_that_prefixes_another_owns_nothing_of_it() -> None:
    # The regression: `migplan-gpu-` prefixed `migplan-gpu-2-...`.
    assert not owned_by(config_name("gpu-2", ENTRIES), "gpu")
    assert not owned_by(config_name("gpu", ENTRIES), "gpu-2")


def test_the_cloud_node_name_that_overflowed() -> None:
    node = "ip-172-31-100-200.ap-southeast-2.compute.internal"
    assert len("migplan-" + node + "-12345678") == 66  # the old name: refused as a label
    assert len(config_name(node, ENTRIES)) <= 63
    assert config_name(node, ENTRIES).startswith("migplan-ip-172-31-100-200.ap-sou")
