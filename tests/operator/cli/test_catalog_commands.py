"""`migplan profiles`, `layouts` and `check-layout` as a user calls them."""

from __future__ import annotations

import json

import pytest

from migplan.operator.cli.app import run
from migplan.planner.hardware.catalog import default_catalog
from migplan.planner.hardware.layout import Layout, is_valid

CLASSIC = "1g.5gb,2g.10gb,3g.20gb,4g.20gb,7g.40gb"


def call(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_layouts_json_prints_exactly_the_maximal_layouts(capsys) -> None:
    # issue #2 acceptance: each valid maximal layout exactly once, nothing else on stdout
    code, out, err = call(
        capsys, "layouts", "A100-SXM4-40GB", "--profiles", CLASSIC, "--maximal", "-o", "json"
    )
    assert code == 0, err
    found = json.loads(out)
    assert len(found) == len(set(found)) == 19
    a100 = default_catalog().model("A100-40GB")
    allowed = CLASSIC.split(",")
    for text in found:
        layout = Layout.parse(text)
        assert is_valid(a100, layout)
        assert {i.profile for i in layout.instances} <= set(allowed)
        for profile in allowed:
            for start in a100.profile(profile).starts:
                extra = layout.with_instance(type(layout.instances[0])(start, profile))
                assert not is_valid(a100, extra)


def test_layouts_text_shows_count_and_slice_map(capsys) -> None:
    code, out, _ = call(capsys, "layouts", "A30", "--maximal")
    assert code == 0
    assert "A30: 17 maximal layouts of all profiles" in out
    assert "|4g.24gb        |" in out
    assert "2g.12gb@0+2g.12gb@2" in out


def test_check_layout_rejects_with_reason(capsys) -> None:
    code, out, _ = call(capsys, "check-layout", "H100-80GB", "3g.40gb@0+4g.40gb@4")
    assert code == 1
    assert "invalid on H100-80GB" in out
    assert "4g.40gb cannot start at slice 4 (allowed starts: 0)" in out


def test_check_layout_accepts_by_product_name(capsys) -> None:
    code, out, _ = call(capsys, "check-layout", "NVIDIA H100 80GB HBM3", "4g.40gb@0+3g.40gb@4")
    assert code == 0
    assert "valid on H100-80GB: 4g.40gb@0+3g.40gb@4" in out


def test_check_layout_json(capsys) -> None:
    code, out, _ = call(capsys, "check-layout", "a30", "2g.12gb@2+2g.12gb@0", "-o", "json")
    assert code == 0
    assert json.loads(out) == {
        "model": "A30",
        "layout": "2g.12gb@0+2g.12gb@2",
        "valid": True,
        "violations": [],
    }
    code, out, _ = call(capsys, "check-layout", "a30", "2g.12gb@0+1g.6gb@1", "-o", "json")
    assert code == 1
    assert [v["rule"] for v in json.loads(out)["violations"]] == ["overlap"]


def test_profiles_lists_models_and_one_model(capsys) -> None:
    code, out, _ = call(capsys, "profiles", "-o", "json")
    assert code == 0
    models = {m["model"]: m for m in json.loads(out)}
    assert models["RTX-PRO-6000"]["memorySlices"] == 12
    code, out, _ = call(capsys, "profiles", "NVIDIA-H100-NVL", "-o", "json")
    assert code == 0
    h100nvl = json.loads(out)
    assert h100nvl["model"] == "H100-94GB"
    assert h100nvl["profiles"][0]["starts"] == [0, 1, 2, 3, 4, 5, 6]
    code, out, _ = call(capsys, "profiles", "H100-96GB")
    assert code == 0
    assert "inferred" in out
    assert "3g.48gb" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["layouts"], "Missing argument"),
        (["layouts", "V100"], "unknown GPU model 'V100'"),
        (["layouts", "A30", "--profiles", "1g.5gb"], "unknown profile '1g.5gb' for A30"),
        (["layouts", "A30", "--profiles", ","], "--profiles needs at least one profile name"),
        (["layouts", "A30", "-o", "xml"], "Invalid value for '--output'"),
        (["check-layout", "A30", "2g.12gb@"], "is not of the form PROFILE@START"),
        (["check-layout", "A30", "2g.12GB@0"], "is not a MIG profile name"),
        (["check-layout", "A30"], "Missing argument"),
        (["profiles", "nope"], "unknown GPU model 'nope'"),
        (["nope"], "No such command 'nope'"),
        (["--log-level", "loud", "profiles"], "unknown log level 'loud'"),
        (["--profiles-dir", "/nonexistent", "profiles"], "no GPU profile files"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message) -> None:
    code, out, err = call(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("migplan: error: ")
    assert message in err


def test_broken_profiles_dir_is_bad_input(capsys, tmp_path) -> None:
    (tmp_path / "a30.yaml").write_text("model: A30\n")
    code, _, err = call(capsys, "--profiles-dir", str(tmp_path), "layouts", "A30")
    assert code == 2
    assert "a30.yaml: description: Field required" in err
