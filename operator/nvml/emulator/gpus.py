"""The emulated GPUs: MIG mode, GPU and compute instances, processes, and the rules NVML
enforces on them.

The rules and codes follow nvml.h and shared/reference/mig-hardware-facts.md: a GPU instance
only at an allowed placement of its profile (INVALID_ARGUMENT otherwise), never on occupied
memory slices and within max counts and media-engine exclusivity (INSUFFICIENT_RESOURCES), MIG
operations with MIG off (NOT_SUPPORTED), destroying a GPU instance that has compute instances
or processes, or a compute instance with processes (IN_USE), and on Ampere a MIG mode change
that stays pending until the GPU is reset (the activation status is RESET_REQUIRED). Instances
do not survive a reset. A rule that is broken raises `NvmlReturn` with the code the C library
returns; library.py turns it into that return value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migplan.operator.nvml import errors
from migplan.planner.hardware.catalog import GpuModel, Profile
from migplan.planner.hardware.layout import Instance, Layout, check_layout

MIG_DISABLE = 0
MIG_ENABLE = 1
ENGINE_PROFILE_SHARED = 0  # NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
MIG_DEVICES_PER_GPU = 7
# compute slices -> NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE (nvml.h)
CI_PROFILE_BY_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
SLICES_BY_CI_PROFILE = {v: k for k, v in CI_PROFILE_BY_SLICES.items()}


class NvmlReturn(Exception):
    """An NVML return code other than success, raised inside the emulator."""

    def __init__(self, code: int) -> None:
        super().__init__(errors.NAMES.get(code, str(code)))
        self.code = code


@dataclass
class Process:
    pid: int
    used_memory: int = 0


@dataclass
class ComputeInstance:
    id: int
    profile_id: int
    processes: list[Process] = field(default_factory=list)


@dataclass
class GpuInstance:
    id: int
    profile_id: int
    start: int
    size: int
    compute: dict[int, ComputeInstance] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)


@dataclass
class Gpu:
    """One emulated GPU of a catalog model."""

    index: int
    model: GpuModel
    uuid: str
    mig_current: int = MIG_DISABLE
    mig_pending: int = MIG_DISABLE
    instances: dict[int, GpuInstance] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)  # non-MIG use

    def layout(self) -> Layout:
        return Layout.of(
            [Instance(gi.start, self.profile(gi.profile_id).name) for gi in self.instances.values()]
        )

    def profile(self, profile_id: int) -> Profile:
        found = self.model.profile_by_id(profile_id)
        if found is None:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        return found

    def require_mig(self) -> None:
        if self.mig_current != MIG_ENABLE:
            raise NvmlReturn(errors.NOT_SUPPORTED)

    def instance(self, gi_id: int) -> GpuInstance:
        self.require_mig()
        if gi_id not in self.instances:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        return self.instances[gi_id]

    def memory_total_mib(self) -> int:
        """The whole GPU's memory as NVML reports it (the largest profile's where
        profiles/ has no total)."""
        if self.model.memory is not None:
            return self.model.memory.mib
        return max((p.memory_mib or 0) for p in self.model.profiles)

    # ---- MIG mode --------------------------------------------------------------------------

    def set_mig_mode(self, mode: int) -> int:
        """Request a MIG mode; returns the activation status."""
        if mode not in (MIG_DISABLE, MIG_ENABLE):
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        if self.instances or self.processes:
            raise NvmlReturn(errors.IN_USE)
        self.mig_pending = mode
        if self.model.mig_mode_change_needs_reset and self.mig_current != mode:
            return errors.RESET_REQUIRED
        self.mig_current = mode
        return errors.SUCCESS

    def reset(self) -> None:
        """A GPU reset: the pending MIG mode applies and every instance is gone."""
        self.mig_current = self.mig_pending
        self.instances.clear()

    # ---- GPU instances ---------------------------------------------------------------------

    def create_instance(self, profile_id: int, start: int, size: int) -> GpuInstance:
        self.require_mig()
        profile = self.profile(profile_id)
        if start not in profile.starts or size != profile.size:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        grown = self.layout().with_instance(Instance(start, profile.name))
        if check_layout(self.model, grown):
            raise NvmlReturn(errors.INSUFFICIENT_RESOURCES)
        gi_id = min(set(range(1, 64)) - set(self.instances))
        created = GpuInstance(gi_id, profile.id, start, profile.size)
        self.instances[gi_id] = created
        return created

    def destroy_instance(self, gi_id: int) -> None:
        gi = self.instance(gi_id)
        if gi.compute or gi.processes:
            raise NvmlReturn(errors.IN_USE)
        del self.instances[gi_id]

    # ---- compute instances -----------------------------------------------------------------

    def compute_profile(self, gi_id: int, ci_profile: int, engine: int) -> tuple[int, int]:
        """(compute slices, how many fit in the GPU instance) of a compute-instance profile."""
        gi = self.instance(gi_id)
        slices = self.profile(gi.profile_id).compute_slices
        wanted = SLICES_BY_CI_PROFILE.get(ci_profile)
        if wanted is None or wanted > slices or engine != ENGINE_PROFILE_SHARED:
            raise NvmlReturn(errors.NOT_SUPPORTED)
        return wanted, slices // wanted

    def create_compute_instance(self, gi_id: int, ci_profile: int) -> ComputeInstance:
        """Only the full-size default compute instance is emulated."""
        gi = self.instance(gi_id)
        slices = self.profile(gi.profile_id).compute_slices
        if ci_profile != CI_PROFILE_BY_SLICES.get(slices):
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        if gi.compute:
            raise NvmlReturn(errors.INSUFFICIENT_RESOURCES)
        created = ComputeInstance(0, ci_profile)
        gi.compute[created.id] = created
        return created

    def compute_instance(self, gi_id: int, ci_id: int) -> ComputeInstance:
        found = self.instance(gi_id).compute.get(ci_id)
        if found is None:
            raise NvmlReturn(errors.INVALID_ARGUMENT)
        return found

    def destroy_compute_instance(self, gi_id: int, ci_id: int) -> None:
        if self.compute_instance(gi_id, ci_id).processes:
            raise NvmlReturn(errors.IN_USE)
        del self.instances[gi_id].compute[ci_id]

    # ---- MIG devices -----------------------------------------------------------------------

    def max_mig_devices(self) -> int:
        """0 with MIG off, as a real H200 with driver 580 answers (profiles/evidence/)."""
        if self.mig_current != MIG_ENABLE:
            return 0
        return MIG_DEVICES_PER_GPU if self.model.compute_slices == 7 else self.model.max_instances

    def mig_devices(self) -> list[tuple[int, int]]:
        """(GPU-instance id, compute-instance id) of each MIG device, in NVML's index order."""
        return [
            (gi.id, ci.id)
            for gi in sorted(self.instances.values(), key=lambda g: g.start)
            for ci in gi.compute.values()
        ]

    def processes_on(self, gi_id: int, ci_id: int) -> list[Process]:
        gi = self.instance(gi_id)
        ci = gi.compute.get(ci_id)
        return list(gi.processes) + (list(ci.processes) if ci else [])
