"""Compare what NVML reports on a GPU with the facts in profiles/ (read-only).

Two kinds of difference: the facts the planner builds layouts from (profile ids and indexes,
compute slices, max counts, placements) and the hardware facts it only reports (memory, SMs,
engines, P2P, the GPU's total memory), which also vary by driver. The agent warns on the
first kind; `migplan nvml-info --check` lists both, each with the edit that fixes
profiles/, and the inferred facts NVML confirms.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from migplan.operator.nvml.adapter import InstanceProfile
from migplan.planner.hardware.catalog import Evidence, GpuModel, Profile


class Kind(StrEnum):
    """Whether a fact changes what the planner may lay out."""

    PLANNING = "planning"
    HARDWARE = "hardware"


@dataclass(frozen=True)
class Difference:
    """One fact on which NVML and profiles/ disagree."""

    profile: str
    fact: str
    nvml: str
    catalog: str
    kind: Kind = Kind.PLANNING
    fix: str = ""

    def __str__(self) -> str:
        return (
            f"{self.profile}: {self.fact} is {self.nvml} on this GPU, {self.catalog} in profiles/"
        )


@dataclass(frozen=True)
class Confirmation:
    """A fact profiles/ marks inferred that NVML shows to be right."""

    profile: str
    fact: str
    value: str
    fix: str


def _placements(pairs: tuple[tuple[int, int], ...]) -> str:
    return "{" + ",".join(str(s) for s, _ in pairs) + "}:" + (str(pairs[0][1]) if pairs else "-")


def profile_file(model: GpuModel) -> str:
    """The file under profiles/ that holds the model (README's naming rule)."""
    return f"profiles/{model.model.lower()}.yaml"


def _engines(engines: tuple[int, ...] | None) -> str:
    """Engine counts as profiles/ writes them, or `unknown`."""
    if engines is None:
        return "unknown"
    copy, decoder, encoder, jpeg, ofa = engines
    return f"{{copy: {copy}, decoder: {decoder}, encoder: {encoder}, jpeg: {jpeg}, ofa: {ofa}}}"


def _catalog_engines(profile: Profile) -> tuple[int, ...] | None:
    e = profile.engines
    return None if e is None else (e.copy_engines, e.decoder, e.encoder, e.jpeg, e.ofa)


def _known(value: object) -> str:
    return "unknown" if value is None else str(value).lower()


def _hardware_facts(profile: Profile, info: InstanceProfile) -> list[tuple[str, str, str, str]]:
    """(fact, NVML's value, ours, YAML key) of the reported-only facts of one profile."""
    return [
        ("memory MiB", str(info.memory_mib), _known(profile.memory_mib), "memoryMib"),
        ("SMs", str(info.multiprocessors), _known(profile.multiprocessors), "multiprocessors"),
        ("engines", _engines(info.engines), _engines(_catalog_engines(profile)), "engines"),
        ("P2P", _known(info.p2p), _known(profile.p2p), "p2p"),
    ]


def compare(
    model: GpuModel,
    reported: list[InstanceProfile],
    *,
    hardware: bool = False,
    memory_mib: int | None = None,
) -> list[Difference]:
    """Every difference between NVML's profiles and the catalog model's; with `hardware`,
    also memory, SMs, engines, P2P and (given `memory_mib`) the GPU's total memory."""
    where = profile_file(model)
    found = []
    seen = set()
    for info in reported:
        profile = model.profile_by_id(info.id)
        label = profile.name if profile else f"profile id {info.id}"
        if profile is None:
            fix = f"add profile id {info.id} ({info.compute_slices} compute slices) to {where}"
            found.append(Difference(label, "presence", "present", "missing", fix=fix))
            continue
        seen.add(profile.id)
        ours = tuple((s, profile.size) for s in profile.starts)
        checks = [
            ("NVML index", str(info.nvml_index), str(profile.nvml_index), "nvmlIndex"),
            ("compute slices", str(info.compute_slices), str(profile.compute_slices), ""),
            ("max count", str(info.max_count), str(profile.max_count), "maxCount"),
        ]
        checks.append(("placements", _placements(info.placements), _placements(ours), ""))
        for fact, nvml, catalog, key in checks:
            if nvml != catalog:
                fix = _planning_fix(where, profile, fact, key, nvml=nvml, info=info)
                found.append(Difference(label, fact, nvml, catalog, Kind.PLANNING, fix))
        if hardware:
            for fact, nvml, catalog, key in _hardware_facts(profile, info):
                if nvml != catalog:
                    fix = f"in {where}, {profile.name}: set {key}: {nvml} (evidence {key}: read)"
                    found.append(Difference(label, fact, nvml, catalog, Kind.HARDWARE, fix))
    found += [
        Difference(p.name, "presence", "missing", "present", fix=f"remove {p.name} from {where}")
        for p in model.profiles
        if p.id not in seen
    ]
    known = model.memory.mib if model.memory else None
    if hardware and memory_mib is not None and memory_mib != known:
        fix = f"in {where} set memory: {{mib: {memory_mib}, evidence: read}}"
        found.append(
            Difference(
                "GPU", "memory MiB", str(memory_mib), str(known or "unknown"), Kind.HARDWARE, fix
            )
        )
    return found


def _planning_fix(
    where: str, profile: Profile, fact: str, key: str, *, nvml: str, info: InstanceProfile
) -> str:
    if fact == "placements":
        starts = ", ".join(str(s) for s, _ in info.placements)
        size = info.placements[0][1]
        return (
            f"in {where}, {profile.name}: set starts: [{starts}] and size: {size} "
            "(evidence placements: read)"
        )
    if fact == "compute slices":
        return f"in {where}, {profile.name} has {nvml} compute slices: rename or re-read it"
    return f"in {where}, {profile.name}: set {key}: {nvml}"


def confirmations(
    model: GpuModel, reported: list[InstanceProfile], *, memory_mib: int | None = None
) -> list[Confirmation]:
    """The facts profiles/ marks inferred that NVML reports with the same value."""
    where = profile_file(model)
    found = []
    for info in reported:
        profile = model.profile_by_id(info.id)
        if profile is None:
            continue
        evidence = profile.evidence
        agreeing = {
            "id": info.nvml_index == profile.nvml_index
            and info.compute_slices == profile.compute_slices,
            "placements": info.placements == tuple((s, profile.size) for s in profile.starts),
            "maxCount": info.max_count == profile.max_count,
            "multiprocessors": info.multiprocessors == profile.multiprocessors,
            "engines": info.engines == _catalog_engines(profile),
            "p2p": info.p2p == profile.p2p,
        }
        marked = {
            "id": evidence.id,
            "placements": evidence.placements,
            "maxCount": evidence.max_count,
            "multiprocessors": evidence.multiprocessors,
            "engines": evidence.engines,
            "p2p": evidence.p2p,
        }
        for key, same in agreeing.items():
            if same and marked[key] is Evidence.INFERRED:
                fix = f"in {where}, {profile.name}: set evidence {key}: read"
                found.append(Confirmation(profile.name, key, "confirmed", fix))
    if (
        model.memory
        and model.memory.evidence is Evidence.INFERRED
        and memory_mib == model.memory.mib
    ):
        found.append(
            Confirmation("GPU", "memory", str(memory_mib), f"in {where}: set memory evidence: read")
        )
    return found
