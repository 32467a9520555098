"""The folders map into the `migplan.*` namespace and nothing becomes a top-level import."""

from __future__ import annotations

import re
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
    from migplan.planner.hardware.catalog import default_profiles_dir

    assert (default_profiles_dir() / "a100-40gb.yaml").is_file()


def _locked() -> dict[str, tuple[str, int]]:
    """image-requirements.txt as {normalised name: (version, number of sha256 hashes)}."""
    import re

    text = (ROOT / "image-requirements.txt").read_text()
    found = {}
    for block in re.split(r"\n(?=\S)", text):
        match = re.match(r"([A-Za-z0-9_.-]+)==([^\s;\\]+)", block)
        if match:
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            found[name] = (match.group(2), block.count("--hash=sha256:"))
    return found


def _runtime_closure() -> set[str]:
    """The distributions `migplan` needs at run time, as installed here (no extras)."""
    import re
    from importlib.metadata import distribution

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = ["migplan"]
    while todo:
        for text in distribution(todo.pop()).requires or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def test_the_image_lock_pins_every_runtime_package_with_hashes() -> None:
    import re

    locked = _locked()
    missing = _runtime_closure() - set(locked)
    assert not missing, f"not in image-requirements.txt (run scripts/lock-image): {missing}"
    assert all(hashes >= 1 for _, hashes in locked.values())
    assert {"setuptools", "wheel"} <= set(locked)  # the build backend, for --no-build-isolation
    constraints = {
        re.sub(r"[-_.]+", "-", name).lower(): version
        for name, _, version in (
            line.partition("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
        )
        if version
    }
    drift = {
        name: (version, constraints[name])
        for name, (version, _) in locked.items()
        if name in constraints and constraints[name] != version
    }
    assert not drift, f"image-requirements.txt and constraints.txt disagree: {drift}"


def test_the_dockerfile_installs_only_hashed_files() -> None:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [
        line for line in text.splitlines() if line.startswith("RUN") and "pip install" in line
    ]
    assert len(installs) == 2, installs
    dependencies, project = installs
    for flag in ("--require-hashes", "--no-deps", "-r image-requirements.txt"):
        assert flag in dependencies
    for flag in ("--no-deps", "--no-build-isolation", "--no-index"):
        assert flag in project  # nothing fetched that the lock did not pin


def test_dockerfile_is_pinned_non_root_and_labelled() -> None:
    text = (ROOT / "Dockerfile").read_text()
    args = dict(
        line.split()[1].split("=", 1)
        for line in text.splitlines()
        if line.startswith("ARG ") and "=" in line
    )
    bases = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]
    bases = [args.get(b.strip("${}"), b) if b.startswith("${") else b for b in bases]
    assert bases
    assert all(re.search(r":[0-9][^@]*@sha256:[0-9a-f]{64}$", b) for b in bases), bases
    assert "USER 65532" in text
    assert 'ENTRYPOINT ["migplan"]' in text
    for label in ("title", "version", "source", "licenses"):
        assert f"org.opencontainers.image.{label}=" in text


def test_the_chart_and_its_image_carry_the_package_version() -> None:
    import yaml

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((ROOT / "charts" / "migplan" / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version
