"""Compare what NVML reports on a GPU with the facts in profiles/ (read-only)."""

from __future__ import annotations

from dataclasses import dataclass

from migplan.operator.nvml.adapter import InstanceProfile
from migplan.planner.catalog import GpuModel


@dataclass(frozen=True)
class Difference:
    """One fact on which NVML and profiles/ disagree."""

    profile: str
    fact: str
    nvml: str
    catalog: str

    def __str__(self) -> str:
        return (
            f"{self.profile}: {self.fact} is {self.nvml} on this GPU, {self.catalog} in profiles/"
        )


def _placements(pairs: tuple[tuple[int, int], ...]) -> str:
    return "{" + ",".join(str(s) for s, _ in pairs) + "}:" + (str(pairs[0][1]) if pairs else "-")


def compare(model: GpuModel, reported: list[InstanceProfile]) -> list[Difference]:
    """Every difference between NVML's profiles and the catalog model's (memory excluded:
    it varies by driver, see mig-hardware-facts.md section 1 item 6)."""
    found = []
    seen = set()
    for info in reported:
        profile = model.profile_by_id(info.id)
        label = profile.name if profile else f"profile id {info.id}"
        if profile is None:
            found.append(Difference(label, "presence", "present", "missing"))
            continue
        seen.add(profile.id)
        ours = tuple((s, profile.size) for s in profile.starts)
        checks = [
            ("NVML index", str(info.nvml_index), str(profile.nvml_index)),
            ("compute slices", str(info.compute_slices), str(profile.compute_slices)),
            ("max count", str(info.max_count), str(profile.max_count)),
            ("placements", _placements(info.placements), _placements(ours)),
        ]
        found += [Difference(label, fact, a, b) for fact, a, b in checks if a != b]
    found += [
        Difference(p.name, "presence", "missing", "present")
        for p in model.profiles
        if p.id not in seen
    ]
    return found
