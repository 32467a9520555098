"""Package `kubectl migplan` for krew: the plugin archive and its krew manifest.

    python scripts/krew_package.py --uri-base https://example.org/migplan/v0.1.0 --out dist

writes `dist/kubectl-migplan_v<version>.tar.gz` (krew/kubectl-migplan and LICENSE) and
`dist/migplan.yaml`, the krew Plugin manifest naming the archive at URI-BASE with its sha256.
Publish the archive there, then `kubectl krew install --manifest=dist/migplan.yaml` (or add the
manifest to a custom index). The version is pyproject.toml's; tests/cluster/
test_kubectl_plugin.py validates the manifest with krew's own validator and installs it with
krew.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tarfile
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTION = """\
Plans NVIDIA MIG geometries for GPU nodes: a CP-SAT solver picks valid MIG layouts for
every covered GPU to fit the demand (explicit counts, pods pending on nvidia.com/mig-*,
Kueue Workloads, gangs) while disturbing as little running work as possible. The plugin
previews a GPUPartitionPlan against the live cluster or an inventory file, shows the plans'
status and rollouts, checks a cluster's readiness (doctor) and asks for a rebalance.
"""
CAVEATS = """\
The plugin runs the migplan installed for Python: pip install migplan (Python 3.11 or
later), or set MIGPLAN_PYTHON to the python that has it. The operator is installed on the
cluster separately (helm install migplan charts/migplan).
"""


def _archive(version: str) -> bytes:
    """The plugin archive: the launcher and the licence, same bytes for the same inputs."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for source, mode in ((ROOT / "krew" / "kubectl-migplan", 0o755), (ROOT / "LICENSE", 0o644)):
            data = source.read_bytes()
            info = tarfile.TarInfo(source.name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def manifest(*, version: str, uri: str, sha256: str) -> dict[str, object]:
    """The krew Plugin manifest (krew.googlecontainertools.github.com/v1alpha2)."""
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "migplan"},
        "spec": {
            "version": f"v{version}",
            "shortDescription": "Plan, preview and roll out NVIDIA MIG partitions",
            "description": DESCRIPTION,
            "caveats": CAVEATS,
            "platforms": [
                {
                    "selector": {
                        "matchExpressions": [
                            {"key": "os", "operator": "In", "values": ["linux", "darwin"]}
                        ]
                    },
                    "uri": uri,
                    "sha256": sha256,
                    "bin": "kubectl-migplan",
                    "files": [
                        {"from": "kubectl-migplan", "to": "."},
                        {"from": "LICENSE", "to": "."},
                    ],
                }
            ],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uri-base", required=True, help="where the archive will be published")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="output folder")
    args = parser.parse_args(argv)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    data = _archive(version)
    name = f"kubectl-migplan_v{version}.tar.gz"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / name).write_bytes(data)
    document = manifest(
        version=version,
        uri=f"{args.uri_base.rstrip('/')}/{name}",
        sha256=hashlib.sha256(data).hexdigest(),
    )
    (args.out / "migplan.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    print(f"wrote {args.out / name} and {args.out / 'migplan.yaml'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
