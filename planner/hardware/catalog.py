"""The GPU catalog: MIG facts per GPU model, loaded and validated from `profiles/*.yaml`.

Every geometry migplan considers is derived from these facts (placement starts and sizes, max
counts, media-engine classes); nothing else in the code base hard-codes a MIG layout.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from enum import StrEnum
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Self

import yaml
from pydantic import Field, field_validator, model_validator

from migplan.planner.errors import CatalogError, UnknownModelError, UnknownProfileError
from migplan.planner.schema import CamelModel, parse_model

PROFILE_NAME = re.compile(
    r"^(?P<compute>[1-9][0-9]*)g\.(?P<mem>[0-9]+)gb(?P<suffix>\+me\.all|\+me|\+gfx|-me)?$"
)
"""A GPU-instance profile name as NVML tooling prints it: `1g.10gb`, `1g.5gb+me`, `2g.48gb-me`."""


class MediaClass(StrEnum):
    """Which media engines (decoders, JPEG, OFA) a profile claims, from its name suffix."""

    PLAIN = "plain"
    ME = "+me"
    ME_ALL = "+me.all"
    NO_ME = "-me"
    GFX = "+gfx"

    @classmethod
    def from_suffix(cls, suffix: str | None) -> MediaClass:
        """The class a profile-name suffix (`+me`, `-me`, ... or none) stands for."""
        return cls(suffix) if suffix else cls.PLAIN


class Evidence(StrEnum):
    """How a value in `profiles/` is known (see shared/reference/mig-hardware-facts.md)."""

    READ = "read"
    """Read in hardware output (nvidia-smi / NVML) or an NVIDIA table for this exact SKU."""
    DERIVED = "derived"
    """Computed from read values (for example GiB x 1024)."""
    INFERRED = "inferred"
    """Not read for this SKU; assumed from a sibling SKU. Confirm with `migplan nvml-info`."""


class ProfileEvidence(CamelModel):
    """Evidence per fact of one profile."""

    id: Evidence
    placements: Evidence
    max_count: Evidence
    memory_mib: Evidence | None = None
    multiprocessors: Evidence | None = None
    engines: Evidence | None = None
    p2p: Evidence | None = None


class Engines(CamelModel):
    """The engines of a GPU instance, as `nvidia-smi mig -lgip` lists them (CE, DEC, ENC,
    JPEG, OFA) and NVML's GPU-instance profile info reports them."""

    copy_engines: Annotated[int, Field(ge=0, alias="copy")]
    decoder: Annotated[int, Field(ge=0)]
    encoder: Annotated[int, Field(ge=0)]
    jpeg: Annotated[int, Field(ge=0)]
    ofa: Annotated[int, Field(ge=0)]

    def __str__(self) -> str:
        return (
            f"CE {self.copy_engines}, DEC {self.decoder}, ENC {self.encoder}, "
            f"JPEG {self.jpeg}, OFA {self.ofa}"
        )


class Profile(CamelModel):
    """A GPU-instance profile of one GPU model, e.g. `3g.40gb` on H100-80GB."""

    name: Annotated[str, Field(pattern=PROFILE_NAME.pattern)]
    id: Annotated[int, Field(ge=0, description="profile ID as `nvidia-smi mig -lgip` shows it")]
    nvml_index: Annotated[
        int, Field(ge=0, description="NVML_GPU_INSTANCE_PROFILE_* index constant")
    ]
    compute_slices: Annotated[int, Field(ge=1)]
    size: Annotated[int, Field(ge=1, description="placement size in memory-slice units")]
    starts: Annotated[tuple[int, ...], Field(min_length=1)]
    max_count: Annotated[int, Field(ge=1)]
    memory_mib: Annotated[int | None, Field(ge=1)] = None
    multiprocessors: Annotated[
        int | None, Field(ge=1, description="SMs of the GPU instance (`-lgip` column SM)")
    ] = None
    engines: Engines | None = None
    p2p: Annotated[bool | None, Field(description="peer-to-peer supported (`-lgip` P2P)")] = None
    media: MediaClass
    evidence: ProfileEvidence
    note: str | None = None

    @field_validator("starts")
    @classmethod
    def _starts_sorted_unique(cls, starts: tuple[int, ...]) -> tuple[int, ...]:
        if any(s < 0 for s in starts):
            raise ValueError("starts must be >= 0")
        if list(starts) != sorted(set(starts)):
            raise ValueError("starts must be strictly increasing")
        return starts

    @model_validator(mode="after")
    def _hardware_facts_carry_evidence(self) -> Self:
        for fact in ("multiprocessors", "engines", "p2p"):
            has_value = getattr(self, fact) is not None
            has_evidence = getattr(self.evidence, fact) is not None
            if has_value != has_evidence:
                which = "evidence" if has_value else "a value"
                raise ValueError(f"{fact} needs {which} as well (evidence: {{{fact}: ...}})")
        return self

    @model_validator(mode="after")
    def _name_matches_facts(self) -> Self:
        match = PROFILE_NAME.match(self.name)
        assert match is not None  # the field pattern already checked it
        if int(match["compute"]) != self.compute_slices:
            raise ValueError(
                f"name {self.name!r} says {match['compute']}g but computeSlices is "
                f"{self.compute_slices}"
            )
        if MediaClass.from_suffix(match["suffix"]) != self.media:
            raise ValueError(
                f"name {self.name!r} implies media class "
                f"{MediaClass.from_suffix(match['suffix']).value!r}, not {self.media.value!r}"
            )
        return self


class Product(CamelModel):
    """One product name a model matches: as NVML reports it and as GFD labels it."""

    nvml: str
    gfd: str
    pci_device_id: Annotated[str | None, Field(pattern=r"^0x[0-9A-F]{4}$")] = None
    evidence: Evidence

    @model_validator(mode="after")
    def _gfd_follows_nvml(self) -> Self:
        # GPU feature discovery labels the NVML name with spaces replaced by dashes.
        if self.gfd != self.nvml.replace(" ", "-"):
            raise ValueError(
                f"gfd {self.gfd!r} should be the NVML name with spaces as dashes: "
                f"{self.nvml.replace(' ', '-')!r}"
            )
        return self


class TotalMemory(CamelModel):
    """A GPU's total memory as NVML and nvidia-smi report it, with its evidence."""

    mib: Annotated[int, Field(ge=1)]
    evidence: Evidence


class Source(CamelModel):
    """A source the facts in a profile file were read from."""

    key: str
    what: str


class GpuModel(CamelModel):
    """MIG facts of one GPU model: slice counts, profiles with placements, matching products."""

    model: Annotated[str, Field(pattern=r"^[A-Z0-9][A-Z0-9-]*$", description="catalog key")]
    description: str
    architecture: Annotated[str, Field(pattern=r"^(ampere|hopper|blackwell)$")]
    compute_slices: Annotated[int, Field(ge=1)]
    memory_slices: Annotated[int, Field(ge=1, description="length of the placement axis")]
    memory: TotalMemory | None = None
    """The whole GPU's memory as NVML reports it (nvidia-smi's memory total)."""
    max_instances: Annotated[int, Field(ge=1)]
    mig_mode_change_needs_reset: bool
    products: Annotated[tuple[Product, ...], Field(min_length=1)]
    profiles: Annotated[tuple[Profile, ...], Field(min_length=1)]
    sources: tuple[Source, ...] = ()
    notes: tuple[str, ...] = ()

    def __hash__(self) -> int:
        # The planner's caches key on models thousands of times a pass; pydantic's frozen
        # hash walks every profile each time. Equal models have equal keys, so this agrees
        # with equality.
        return hash(self.model)

    @model_validator(mode="after")
    def _profiles_fit_the_gpu(self) -> Self:
        names = [p.name for p in self.profiles]
        ids = [p.id for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError(f"profiles: duplicate profile names: {sorted(_duplicates(names))}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"profiles: duplicate profile ids: {sorted(_duplicates(ids))}")
        for n, p in enumerate(self.profiles):
            where = f"profiles[{n}] ({p.name})"
            if p.compute_slices > self.compute_slices:
                raise ValueError(
                    f"{where}.computeSlices: {p.compute_slices} exceeds the GPU's "
                    f"{self.compute_slices} compute slices"
                )
            last = p.starts[-1]
            if last + p.size > self.memory_slices:
                raise ValueError(
                    f"{where}.starts: start {last} + size {p.size} runs past the "
                    f"{self.memory_slices} memory slices"
                )
        return self

    @cached_property
    def profiles_by_name(self) -> Mapping[str, Profile]:
        """The profiles keyed by name."""
        return {p.name: p for p in self.profiles}

    def profile(self, name: str) -> Profile:
        """The profile called `name`; raises UnknownProfileError naming the known ones."""
        try:
            return self.profiles_by_name[name]
        except KeyError:
            raise UnknownProfileError(
                f"unknown profile {name!r} for {self.model} "
                f"(known: {', '.join(self.profiles_by_name)})"
            ) from None

    def profile_by_id(self, profile_id: int) -> Profile | None:
        """The profile with NVML profile ID `profile_id`, if this model has one."""
        return next((p for p in self.profiles if p.id == profile_id), None)


def _duplicates(values: Iterable[Any]) -> set[Any]:
    return {value for value, count in Counter(values).items() if count > 1}


def normalize_product_name(name: str) -> str:
    """Fold a model key, NVML name or GFD label to one comparable form.

    `NVIDIA H100 80GB HBM3`, `NVIDIA-H100-80GB-HBM3` and `h100-80gb-hbm3` all fold to
    `h100-80gb-hbm3`; a GFD `-MIG-<profile>` suffix (single strategy) is dropped.
    """
    folded = re.sub(r"[\s_]+", "-", name.strip().lower())
    folded = re.sub(r"^nvidia-", "", folded)
    return re.sub(r"-mig-[0-9]+g\.[0-9]+gb.*$", "", folded)


_SEEN_NAMES = 1024
"""Spellings of model names a catalog remembers (a fleet uses a handful; agents' reports
are input, so the memo is bounded)."""


class Catalog:
    """All GPU models known to migplan, with lookup by catalog key or product name."""

    def __init__(self, models: Iterable[GpuModel]) -> None:
        self._models = {m.model: m for m in sorted(models, key=lambda m: m.model)}
        self._by_name: dict[str, GpuModel] = {}
        for m in self._models.values():
            for name in (m.model, *(p.nvml for p in m.products)):
                key = normalize_product_name(name)
                other = self._by_name.setdefault(key, m)
                if other is not m:
                    raise CatalogError(
                        f"product name {name!r} matches both {other.model} and {m.model}"
                    )
        self._seen: dict[str, GpuModel] = {}
        """Names as given, each folded once (a 40,000-GPU inventory names a model per GPU)."""

    def __iter__(self) -> Iterator[GpuModel]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    @property
    def keys(self) -> list[str]:
        """Catalog keys, sorted."""
        return list(self._models)

    def model(self, name: str) -> GpuModel:
        """The model whose key or any product name matches `name`, case-insensitively."""
        found = self._seen.get(name)
        if found is not None:
            return found
        found = self._by_name.get(normalize_product_name(name))
        if found is None:
            raise UnknownModelError(
                f"unknown GPU model {name!r} (known: {', '.join(self._models)}; "
                "product names such as 'NVIDIA A100-SXM4-40GB' also work)"
            )
        if len(self._seen) < _SEEN_NAMES:
            self._seen[name] = found
        return found


_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: every command reads the ten profile files, and
the pure-Python parser took a tenth of a second over them."""


def load_model_file(path: Path) -> GpuModel:
    """Load and validate one profile file; errors name the file and the field. Only a regular
    file is read (a named pipe would wait for a writer forever)."""
    if not path.is_file():
        raise CatalogError(f"{path}: not a regular file")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise CatalogError(f"{path}: cannot read YAML: {exc}".replace("\n", " ")) from None
    model = parse_model(GpuModel, data, source=str(path), error=CatalogError)
    expected = f"{model.model.lower()}.yaml"
    if path.name != expected:
        raise CatalogError(f"{path}: model {model.model} must live in a file named {expected}")
    return model


def default_profiles_dir() -> Path:
    """The `profiles/` data directory shipped with migplan."""
    return Path(str(resources.files("migplan.profiles")))


def load_catalog(directory: Path | None = None) -> Catalog:
    """Load every `*.yaml` in `directory` (default: the shipped profiles) into a Catalog."""
    root = directory or default_profiles_dir()
    files = sorted(root.glob("*.yaml"))
    if not files:
        raise CatalogError(f"{root}: no GPU profile files (*.yaml) found")
    return Catalog(load_model_file(f) for f in files)


_default: Catalog | None = None


def default_catalog() -> Catalog:
    """The shipped catalog, loaded once per process."""
    global _default  # noqa: PLW0603 - a process-wide cache of immutable data
    if _default is None:
        _default = load_catalog()
    return _default
