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


def _pip_install_args(text: str) -> list[str]:
    """The arguments of the first `pip install` in `text`, without pip's own chatter flags."""
    import re
    import shlex

    match = re.search(r"pip install ([^\n&\\]*)", text)
    assert match, "no pip install step"
    quiet = {"--no-cache-dir", "--disable-pip-version-check", "--quiet", "-q"}
    return [a for a in shlex.split(match.group(1)) if a not in quiet]


def test_dockerfile_and_readme_install_the_same_way() -> None:
    dockerfile = _pip_install_args((ROOT / "Dockerfile").read_text())
    readme = _pip_install_args((ROOT / "README.md").read_text().split("## Installing", 1)[1])
    assert dockerfile == readme == ["-c", "constraints.txt", "."]


def test_dockerfile_is_pinned_non_root_and_labelled() -> None:
    text = (ROOT / "Dockerfile").read_text()
    bases = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]
    assert bases
    assert all("@sha256:" in b or b.rsplit(":", 1)[-1][0].isdigit() for b in bases), bases
    assert "USER 65532" in text
    assert 'ENTRYPOINT ["migplan"]' in text
    for label in ("title", "version", "source", "licenses"):
        assert f"org.opencontainers.image.{label}=" in text
