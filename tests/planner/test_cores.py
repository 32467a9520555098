"""The cores a pass may use: affinity bounded by the container's CPU limit (cgroup quota)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from migplan.planner import cores
from migplan.planner.api.spec import SolverSpec
from migplan.planner.cores import quota_cores, usable_cores


def v2(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(text + "\n")
    return root


def v1(root: Path, quota: str, period: str = "100000") -> Path:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(period + "\n")
    return root


@pytest.mark.parametrize(
    ("text", "cores_"),
    [("150000 100000", 1.5), ("200000 50000", 4.0), ("max 100000", None), ("100000", 1.0)],
)
def test_a_cgroup_v2_limit_is_its_quota_over_its_period(tmp_path, text, cores_) -> None:
    assert quota_cores(cgroup_root=v2(tmp_path, text)) == cores_


@pytest.mark.parametrize(("quota", "cores_"), [("50000", 0.5), ("400000", 4.0), ("-1", None)])
def test_a_cgroup_v1_limit_is_its_quota_over_its_period(tmp_path, quota, cores_) -> None:
    assert quota_cores(cgroup_root=v1(tmp_path, quota)) == cores_


def test_no_cgroup_files_or_unreadable_ones_mean_no_limit(tmp_path) -> None:
    assert quota_cores(cgroup_root=tmp_path) is None
    assert quota_cores(cgroup_root=v2(tmp_path / "bad", "lots 100000")) is None


def test_the_cores_are_the_affinity_at_most_the_limit_rounded_up(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(16)), raising=False)
    assert usable_cores(cgroup_root=tmp_path) == 16
    assert usable_cores(cgroup_root=v2(tmp_path / "a", "150000 100000")) == 2
    assert usable_cores(cgroup_root=v2(tmp_path / "b", "20000 100000")) == 1
    assert usable_cores(cgroup_root=v2(tmp_path / "c", "6400000 100000")) == 16


def test_the_solver_uses_every_core_only_where_the_container_may(tmp_path, monkeypatch) -> None:
    """A pod limited to 2 CPUs on a 16-core node gets one CP-SAT worker, not 16."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(16)), raising=False)
    monkeypatch.setattr(cores, "CGROUP_ROOT", tmp_path / "none")
    assert SolverSpec().resolved_workers() == 16
    monkeypatch.setattr(cores, "CGROUP_ROOT", v2(tmp_path / "pod", "200000 100000"))
    assert SolverSpec().resolved_workers() == 1
    monkeypatch.setattr(cores, "CGROUP_ROOT", v2(tmp_path / "big", "800000 100000"))
    assert SolverSpec().resolved_workers() == 8
    assert SolverSpec(workers=3).resolved_workers() == 3


def test_the_process_own_cgroup_is_read_where_it_is_mounted(tmp_path) -> None:
    """A service's cgroup (no namespace of its own) is read, not the top of the tree."""
    membership = tmp_path / "cgroup"
    v2(tmp_path / "root", "max 100000")
    v2(tmp_path / "root" / "system.slice" / "migplan.service", "50000 100000")
    membership.write_text("0::/system.slice/migplan.service\n")
    assert quota_cores(cgroup_root=tmp_path / "root", membership=membership) == 0.5
    v1(tmp_path / "v1", "-1")
    (tmp_path / "v1" / "cpu" / "mine").mkdir()
    (tmp_path / "v1" / "cpu" / "mine" / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "v1" / "cpu" / "mine" / "cpu.cfs_period_us").write_text("100000\n")
    membership.write_text("3:cpuset:/\n2:cpu,cpuacct:/mine\n0::/\n")
    assert quota_cores(cgroup_root=tmp_path / "v1", membership=membership) == 3.0


def test_a_cgroup_named_but_not_mounted_here_falls_back_to_the_top(tmp_path) -> None:
    """In a container without its own cgroup namespace the host's path is named, and the
    container's cgroup is mounted at the top."""
    membership = tmp_path / "cgroup"
    membership.write_text("0::/kubepods/pod-1234/abc\n")
    assert (
        quota_cores(cgroup_root=v2(tmp_path / "root", "100000 100000"), membership=membership)
        == 1.0
    )
