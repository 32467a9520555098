"""The container image, built as CI builds it (scripts/build-image: buildah, no daemon) and run
as its own unprivileged user. Never skipped: scripts/test installs buildah first, and a
build that fails fails here with the script's reason."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MIGPLAN_CACHE", Path.home() / ".cache" / "migplan")) / "image"
IMAGE = "localhost/migplan:test"
USER = "65532"
EXAMPLES = "/usr/share/migplan/examples"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SITE_CAS = Path("/usr/local/share/ca-certificates")
TIMINGS = re.compile(rb'"(wallSeconds|buildSeconds|seconds)": [0-9.e+-]+')


def buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """buildah on the same storage as scripts/build-image."""
    command = [
        "buildah",
        "--root",
        str(CACHE / "storage"),
        "--runroot",
        str(CACHE / "run"),
        "--storage-driver",
        "vfs",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=600)


@pytest.fixture(scope="module")
def image() -> str:
    """Build the image (layers cached between runs)."""
    built = subprocess.run(
        [str(ROOT / "scripts" / "build-image")],
        env={**os.environ, "IMAGE": IMAGE},
        check=False,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert built.returncode == 0, f"scripts/build-image failed:\n{built.stderr[-4000:]}"
    assert built.stdout.strip() == IMAGE
    return IMAGE


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    """A working container of the image, to run commands in (chroot isolation)."""
    name = buildah("from", "--quiet", "--pull=never", image).stdout.strip()
    yield name
    buildah("rm", name, check=False)


def run_in(container: str, *argv: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` in the container, as the image's user unless `user` says otherwise."""
    as_user = ["--user", user] if user else []
    return buildah("run", "--isolation", "chroot", *as_user, container, "--", *argv, check=False)


def test_runs_as_the_unprivileged_user(container: str) -> None:
    ran = run_in(container, "id", "-u")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == USER


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["migplan", "--help"], "Plan and apply NVIDIA MIG geometries"),
        (["migplan", "operator", "--help"], "--metrics-auth"),
        (["migplan", "agent", "--help"], "--node"),
    ],
)
def test_commands_answer_their_help(container: str, argv: list[str], says: str) -> None:
    ran = run_in(container, *argv)
    assert ran.returncode == 0, ran.stderr
    assert says in ran.stdout


def test_dra_selectors_are_evaluated_by_the_helper_in_the_image(container: str) -> None:
    # migplan-cel sits beside the image's python, where the operator looks for it.
    ran = run_in(
        container,
        "python",
        "-c",
        "from migplan.operator.dra.cel import Device;"
        "from migplan.operator.dra.helper import Budget, evaluator;"
        "d = Device(driver='gpu.nvidia.com',"
        " attributes={'gpu.nvidia.com': {'profile': '1g.10gb'}});"
        "print(evaluator().match([\"device.attributes['gpu.nvidia.com'].?profile.orValue('')"
        " == '1g.10gb'\"], [d], budget=Budget())[0].selected)",
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "True"


def test_preview_in_the_image_prints_the_same_plan_as_outside(container: str) -> None:
    inside = run_in(
        container,
        "migplan",
        "preview",
        f"{EXAMPLES}/plan.yaml",
        "--cluster",
        f"{EXAMPLES}/cluster.yaml",
        "-o",
        "json",
    )
    assert inside.returncode == 0, inside.stderr
    outside = subprocess.run(
        [
            str(Path(sys.executable).parent / "migplan"),
            "preview",
            str(ROOT / "examples" / "plan.yaml"),
            "--cluster",
            str(ROOT / "examples" / "cluster.yaml"),
            "-o",
            "json",
        ],
        capture_output=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
    ).stdout
    # Byte for byte, but for how long the solver took.
    assert TIMINGS.sub(rb'"\1": 0', inside.stdout.encode()) == TIMINGS.sub(rb'"\1": 0', outside)
    assert json.loads(inside.stdout)["summary"]["met"] > 0


def test_oci_labels_name_the_version_and_revision(image: str) -> None:
    config = json.loads(buildah("inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    labels = config["Labels"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert labels["org.opencontainers.image.title"] == "migplan"
    assert labels["org.opencontainers.image.version"] == version
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", labels["org.opencontainers.image.revision"])
    for key in ("source", "licenses", "description"):
        assert labels[f"org.opencontainers.image.{key}"]
    assert config["User"] == f"{USER}:{USER}"


@pytest.fixture(scope="module")
def layers(image: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The image's layers as tar files, as a registry would receive them."""
    out = tmp_path_factory.mktemp("oci")
    buildah("push", "--quiet", "--disable-compression", image, f"oci:{out}/layout")
    index = json.loads((out / "layout" / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":", 1)[1]
    manifest = json.loads((out / "layout" / "blobs" / "sha256" / digest).read_text())
    return [
        out / "layout" / "blobs" / "sha256" / layer["digest"].split(":", 1)[1]
        for layer in manifest["layers"]
    ]


def _site_ca_lines() -> list[bytes]:
    """A distinctive line of each site-local CA certificate the host trusts (the proxy's)."""
    lines = []
    for cert in sorted(SITE_CAS.glob("*.crt")) if SITE_CAS.is_dir() else []:
        body = [ln for ln in cert.read_bytes().splitlines() if ln and not ln.startswith(b"-")]
        if len(body) > 4:
            lines.append(body[len(body) // 2])
    return lines


def test_no_layer_holds_the_build_secret_or_writable_app_files(layers: list[Path]) -> None:
    bundle = hashlib.sha256(CA_BUNDLE.read_bytes()).hexdigest() if CA_BUNDLE.exists() else None
    site_lines = _site_ca_lines()
    found: list[str] = []
    for layer in layers:
        with tarfile.open(layer) as tar:
            for member in tar:
                name = member.name.lstrip("./")
                if name.startswith("run/secrets/") and not member.isdir():
                    found.append(f"secret mount left behind: {name}")
                if member.uid == int(USER) or member.gid == int(USER):
                    found.append(f"owned by the image's user: {name}")
                if (
                    name.startswith("opt/migplan/")
                    and not member.issym()
                    and (member.uid != 0 or member.mode & 0o022)
                ):
                    found.append(f"app file not root-owned read-only: {name}")
                if not member.isfile():
                    continue
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                if bundle and hashlib.sha256(data).hexdigest() == bundle:
                    found.append(f"the host's CA bundle: {name}")
                if any(line in data for line in site_lines):
                    found.append(f"a site-local CA certificate: {name}")
    assert not found, "\n".join(found[:20])
