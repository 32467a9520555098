"""The folders map into the `migplan.*` namespace and nothing becomes a top-level import."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_python_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapped = {folder: name for name, folder in config["package-dir"].items()}
    found = set()
    for folder, name in mapped.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found == listed


def test_operator_does_not_shadow_the_standard_library() -> None:
    import operator

    import migplan.operator

    assert hasattr(operator, "itemgetter")
    assert Path(migplan.operator.__file__).parent == ROOT / "operator"


def test_no_top_level_planner_or_operator_package(tmp_path: Path) -> None:
    # Run from a neutral directory: the repository root on sys.path would hide the question.
    probe = (
        "import importlib.util as u, operator; "
        "print(u.find_spec('planner'), u.find_spec('profiles'), operator.__file__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    planner, profiles, operator_file = result.stdout.split()
    assert planner == "None"
    assert profiles == "None"
    assert Path(operator_file).parent != ROOT / "operator"


def test_profiles_ship_as_package_data() -> None:
    from migplan.planner.catalog import default_profiles_dir

    assert (default_profiles_dir() / "a100-40gb.yaml").is_file()
