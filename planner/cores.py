"""How many cores this process may really use: its CPU affinity, bounded by the CPU quota of
its container (a Kubernetes pod's CPU limit is a cgroup quota).

Python's `os.cpu_count()` and `os.sched_getaffinity()` see every core of the node: an
operator pod limited to one CPU on a 64-core node would start 64 CP-SAT workers, or fork a
child for a second core it does not have, and the quota would throttle both. The quota is read from
`cpu.max` (cgroup v2) or `cpu/cpu.cfs_quota_us` over `cpu.cfs_period_us` (v1) under
`/sys/fs/cgroup`, in the process's own cgroup as `/proc/self/cgroup` names it where that
directory is there (a service on a host), else at the top (a container, which sees its own
cgroup there, whichever path the host gives it), as joblib's `loky.cpu_count()` reads the top.
Hand-written rather than taken from loky: importing loky costs 80-100 ms, which every
`migplan` command would pay (measured on this project's 2-core machine).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMBERSHIP = Path("/proc/self/cgroup")


def usable_cores(*, cgroup_root: Path | None = None, membership: Path | None = None) -> int:
    """Cores this process may run on at once: its affinity, at most its cgroup's quota
    (rounded up: a limit of 1.5 CPUs runs two threads, each part of the time). At least 1.
    `cgroup_root`, `membership`: default `CGROUP_ROOT`, `MEMBERSHIP`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    quota = quota_cores(cgroup_root=cgroup_root, membership=membership)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def quota_cores(*, cgroup_root: Path | None = None, membership: Path | None = None) -> float | None:
    """The CPU quota of this process's cgroup (`membership` names it; cgroups mounted at
    `cgroup_root`), in cores; None where none is set or none can be read."""
    root = cgroup_root or CGROUP_ROOT
    own = _own_cgroups(membership)
    v2 = _read(_mine(root, own.get("")) / "cpu.max")
    if v2 is not None:
        limit, _, every = v2.partition(" ")
        return _ratio(limit, every or "100000")
    v1 = _mine(root / "cpu", own.get("cpu"))
    quota = _read(v1 / "cpu.cfs_quota_us")
    period = _read(v1 / "cpu.cfs_period_us")
    if quota is None or period is None:
        return None
    return _ratio(quota, period)


def _own_cgroups(membership: Path | None) -> dict[str, str]:
    """From `/proc/self/cgroup`: the cgroup v2 path (key "") and the v1 `cpu` controller's."""
    found: dict[str, str] = {}
    for line in (_read(membership or MEMBERSHIP) or "").splitlines():
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "-", "")
        if controllers == "":
            found[""] = path
        elif "cpu" in controllers.split(","):
            found["cpu"] = path
    return found


def _mine(mount: Path, path: str | None) -> Path:
    """The cgroup `path` under `mount` where it is there, else `mount` itself."""
    if path and path != "/":
        own = mount / path.lstrip("/")
        if own.is_dir():
            return own
    return mount


def _ratio(quota: str, period: str) -> float | None:
    """quota / period where both are positive numbers of microseconds ("max" or -1: none)."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
