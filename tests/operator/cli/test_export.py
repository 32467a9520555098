"""The mig-parted export round-trips through a strict parser of mig-parted's v1 schema."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from migplan.operator.cli.app import run

ROOT = Path(__file__).resolve().parents[3]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=False)


class MigConfigSpec(Strict):
    """One entry of a mig-config (mig-parted api/spec/v1 MigConfigSpec)."""

    device_filter: str | list[str] | None = Field(default=None, alias="device-filter")
    devices: Literal["all"] | list[Annotated[int, Field(ge=0)]]
    mig_enabled: bool = Field(alias="mig-enabled")
    mig_devices: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, alias="mig-devices"
    )


class Spec(Strict):
    """mig-parted's config file (api/spec/v1 Spec)."""

    version: Literal["v1"]
    mig_configs: dict[str, list[MigConfigSpec]] = Field(alias="mig-configs")


def test_example_plan_exports_and_round_trips(capsys) -> None:
    code = run(
        [
            "export",
            "mig-parted",
            str(ROOT / "examples" / "plan.yaml"),
            "--cluster",
            str(ROOT / "examples" / "cluster.yaml"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    spec = Spec.model_validate(yaml.safe_load(out))
    assert out.startswith("# mig-parted config for GPUPartitionPlan shared-pool")
    assert "its targets and input hash differ from `migplan preview`'s" in err
    assert err.rstrip().endswith("pods evicted: batch/etl-7, batch/etl-8")

    code = run(
        [
            "preview",
            str(ROOT / "examples" / "plan.yaml"),
            "--cluster",
            str(ROOT / "examples" / "cluster.yaml"),
            "-o",
            "yaml",
        ]
    )
    plan = yaml.safe_load(capsys.readouterr().out)
    # The preview plans placements; export plans whole-GPU rebuilds. Both must cover the same
    # GPUs, and the export's counts must be valid per GPU and meet the same demand.
    gpus = {(g["node"], g["gpu"]) for g in plan["gpus"]}
    exported: dict[tuple[str, int], dict[str, int]] = {}
    for name, entries in spec.mig_configs.items():
        node = name.removeprefix("migplan-")
        for entry in entries:
            assert entry.mig_enabled
            assert entry.devices != "all"
            for device in entry.devices:
                exported[(node, device)] = entry.mig_devices
    assert set(exported) == gpus
    supplied: Counter[str] = Counter()
    for counts in exported.values():
        supplied.update(counts)
    for item in plan["demand"]:
        profile = item["resource"].removeprefix("nvidia.com/mig-")
        assert supplied[profile] >= item["met"]


def test_groups_gpus_with_equal_counts() -> None:
    from migplan.planner.export.migparted import node_config

    entries = node_config(
        {0: "3g.40gb@0+3g.40gb@4", 1: "7g.80gb@0", 2: "3g.40gb@4+3g.40gb@0", 3: "-"}
    )
    assert entries == [
        {"devices": [0, 2], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}},
        {"devices": [3], "mig-enabled": True, "mig-devices": {}},
    ]
