import re

from hypothesis import given
from hypothesis import strategies as st

from migplan.planner.api.labels import LABEL_VALUE, label_value

NAME = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,200}[a-z0-9])?", fullmatch=True)


@given(NAME)
def test_every_name_becomes_a_valid_label_value(name: str) -> None:
    value = label_value(name)
    assert re.fullmatch(LABEL_VALUE, value)
    assert len(value) <= 63


def test_a_short_name_is_its_own_label_value() -> None:
    assert label_value("shared-pool") == "shared-pool"


def test_long_names_that_share_a_prefix_stay_distinct() -> None:
    prefix = "p" * 70
    assert label_value(prefix + "-a") != label_value(prefix + "-b")
