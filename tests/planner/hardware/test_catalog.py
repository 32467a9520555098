"""The shipped GPU catalog, product-name lookup, and the schema's errors for broken files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from migplan.planner.errors import CatalogError, UnknownModelError, UnknownProfileError
from migplan.planner.hardware.catalog import (
    Evidence,
    MediaClass,
    default_profiles_dir,
    load_catalog,
    normalize_product_name,
)

REQUIRED = {
    # issue #2: models (and one product name each) the catalog must cover
    "A100-40GB": ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"],
    "A100-80GB": ["NVIDIA A100-SXM4-80GB"],
    "A30": ["NVIDIA A30"],
    "H100-80GB": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"],
    "H100-94GB": ["NVIDIA H100 NVL"],
    "H100-96GB": ["NVIDIA GH200 480GB"],
    "H200-141GB": ["NVIDIA H200", "NVIDIA H200 NVL"],
    "GH200-144GB": ["NVIDIA GH200 144G HBM3e"],
    "B200": ["NVIDIA B200"],
    "RTX-PRO-6000": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
}


@pytest.fixture
def profiles_copy(tmp_path: Path) -> Path:
    """A writable copy of the shipped profiles directory."""
    target = tmp_path / "profiles"
    shutil.copytree(default_profiles_dir(), target, ignore=shutil.ignore_patterns("*.py"))
    return target


def _edit(path: Path, change) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_catalog_covers_the_required_models_and_products(catalog) -> None:
    for key, products in REQUIRED.items():
        model = catalog.model(key)
        assert model.model == key
        for product in products:
            assert catalog.model(product) is model


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),  # NVML
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),  # GFD label
        ("A100-SXM4-40GB", "A100-40GB"),  # without the vendor
        ("nvidia h100 80gb hbm3", "H100-80GB"),  # any case
        ("h100-80gb", "H100-80GB"),  # catalog key
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),  # GFD single strategy
    ],
)
def test_model_lookup_accepts_keys_and_product_names(catalog, name: str, key: str) -> None:
    assert catalog.model(name).model == key


def test_unknown_model_names_the_known_ones(catalog) -> None:
    with pytest.raises(UnknownModelError, match=r"unknown GPU model 'V100'.*A100-40GB"):
        catalog.model("V100")


def test_normalize_folds_nvml_and_gfd_forms_together() -> None:
    assert normalize_product_name("NVIDIA H100 80GB HBM3") == normalize_product_name(
        "NVIDIA-H100-80GB-HBM3"
    )


def test_gfd_labels_are_nvml_names_with_dashes(catalog) -> None:
    for model in catalog:
        for product in model.products:
            assert product.gfd == product.nvml.replace(" ", "-")


def test_every_profile_records_evidence_and_fits_its_gpu(catalog) -> None:
    for model in catalog:
        for p in model.profiles:
            assert p.evidence.placements in set(Evidence)
            assert all(s + p.size <= model.memory_slices for s in p.starts)
            assert p.compute_slices <= model.compute_slices


def test_every_profile_has_its_hardware_facts_and_every_model_its_memory(catalog) -> None:
    for model in catalog:
        assert model.memory is not None, model.model
        assert model.memory.mib >= max(p.memory_mib or 0 for p in model.profiles), model.model
        for p in model.profiles:
            assert p.multiprocessors, p.name
            assert p.engines is not None, p.name
            assert p.p2p is False, p.name
            assert None not in (p.evidence.multiprocessors, p.evidence.engines, p.evidence.p2p)
        full = max(model.profiles, key=lambda p: (p.compute_slices, p.multiprocessors or 0))
        assert all((p.multiprocessors or 0) <= (full.multiprocessors or 0) for p in model.profiles)


def test_hardware_facts_read_from_transcripts(catalog) -> None:
    h100 = catalog.model("H100-80GB")
    assert h100.memory.mib == 81559
    assert h100.profile("1g.20gb").multiprocessors == 26  # not linear in compute slices
    assert str(h100.profile("7g.80gb").engines) == "CE 8, DEC 7, ENC 0, JPEG 7, OFA 1"
    assert h100.profile("3g.40gb").evidence.multiprocessors is Evidence.READ
    b200 = catalog.model("B200")
    assert b200.memory.mib == 183359
    assert b200.profile("3g.90gb").evidence.multiprocessors is Evidence.INFERRED
    assert catalog.model("RTX-PRO-6000").profile("1g.24gb+me.all").engines.decoder == 4
    pcie = next(p for p in h100.products if p.nvml == "NVIDIA H100 PCIe")
    assert (pcie.pci_device_id, pcie.evidence) == ("0x2331", Evidence.READ)


def test_known_facts_from_the_reference(catalog) -> None:
    a100 = catalog.model("A100-40GB")
    assert a100.profile("3g.20gb").starts == (0, 4)
    assert a100.profile("1g.10gb").size == 2
    assert a100.profile("1g.5gb").id == 19
    assert a100.profile("1g.5gb").evidence.placements is Evidence.READ
    assert a100.mig_mode_change_needs_reset
    h100 = catalog.model("H100-80GB")
    assert h100.profile("4g.40gb").starts == (0,)
    assert not h100.mig_mode_change_needs_reset
    assert catalog.model("B200").profile("1g.23gb").evidence.placements is Evidence.INFERRED
    # read on a real H200 (profiles/evidence/h200-141gb-580.159.04-2026-11-26.json)
    h200 = catalog.model("H200-141GB").profile("2g.35gb")
    assert h200.evidence.placements is Evidence.READ
    assert h200.memory_mib == 33280
    # RTX PRO 6000 Blackwell: 12 placement units, a 1g instance takes 3 of them
    rtx = catalog.model("RTX-PRO-6000")
    assert rtx.memory_slices == 12
    assert rtx.profile("1g.24gb").size == 3
    assert rtx.profile("1g.24gb").starts == (0, 3, 6, 9)
    assert rtx.profile("2g.48gb+me.all").media is MediaClass.ME_ALL
    # the same NVML profile ID means different profiles on different GPUs
    assert catalog.model("A30").profile_by_id(14).name == "1g.6gb"
    assert a100.profile_by_id(14).name == "2g.10gb"


def test_unknown_profile_names_the_known_ones(catalog) -> None:
    with pytest.raises(UnknownProfileError, match=r"'5g.50gb' for H100-80GB.*1g\.10gb"):
        catalog.model("H100-80GB").profile("5g.50gb")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["profiles"][2].update(starts=[0, 2, 4, 7]),
            r"a100-40gb\.yaml: profiles\[2\] \(1g\.10gb\)\.starts: start 7 \+ size 2 runs past "
            r"the 8 memory slices$",
        ),
        (
            lambda d: d["profiles"][0].update(maxCount=0),
            r"a100-40gb\.yaml: profiles\[0\] \(1g\.5gb\)\.maxCount: .*greater than or equal to 1",
        ),
        (
            lambda d: d["profiles"][0].update(computeSlices=2),
            r"a100-40gb\.yaml: profiles\[0\] \(1g\.5gb\): name '1g\.5gb' says 1g but "
            r"computeSlices is 2$",
        ),
        (
            lambda d: d["profiles"][1].update(media="plain"),
            r"profiles\[1\] \(1g\.5gb\+me\): .*implies media class '\+me'",
        ),
        (
            lambda d: d["profiles"][3].update(starts=[4, 2]),
            r"profiles\[3\] \(2g\.10gb\)\.starts: .*strictly increasing",
        ),
        (
            lambda d: d["profiles"][0].update(name="1g.5GB"),
            r"profiles\[0\] \(1g\.5GB\)\.name: String should match pattern",
        ),
        (lambda d: d.update(computeSlice=7), r"a100-40gb\.yaml: computeSlice: Extra inputs"),
        (
            lambda d: d["profiles"][0]["evidence"].pop("engines"),
            r"profiles\[0\] \(1g\.5gb\): engines needs evidence as well",
        ),
        (lambda d: d.pop("memorySlices"), r"a100-40gb\.yaml: memorySlices: Field required"),
        (
            lambda d: d["products"][0].update(gfd="NVIDIA A100"),
            r"products\[0\]: .*NVML name with spaces as dashes",
        ),
        (
            lambda d: d["profiles"][4].update(id=19),
            r"a100-40gb\.yaml: profiles: duplicate profile ids: \[19\]$",
        ),
    ],
)
def test_broken_profile_file_names_file_and_field(profiles_copy, change, expected) -> None:
    _edit(profiles_copy / "a100-40gb.yaml", change)
    with pytest.raises(CatalogError, match=expected):
        load_catalog(profiles_copy)


def test_unparsable_yaml_names_the_file(profiles_copy) -> None:
    (profiles_copy / "a30.yaml").write_text("model: A30\nprofiles: [\n")
    with pytest.raises(CatalogError, match=r"a30\.yaml: cannot read YAML"):
        load_catalog(profiles_copy)


def test_file_name_must_match_model_key(profiles_copy) -> None:
    (profiles_copy / "a30.yaml").rename(profiles_copy / "a30-24gb.yaml")
    with pytest.raises(CatalogError, match=r"a30-24gb\.yaml: model A30 must live in .*a30\.yaml"):
        load_catalog(profiles_copy)


def test_a_product_name_may_match_only_one_model(profiles_copy) -> None:
    _edit(
        profiles_copy / "a30.yaml",
        lambda d: d["products"].append(
            {"nvml": "NVIDIA H100 NVL", "gfd": "NVIDIA-H100-NVL", "evidence": "inferred"}
        ),
    )
    with pytest.raises(CatalogError, match=r"'NVIDIA H100 NVL' matches both"):
        load_catalog(profiles_copy)


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no GPU profile files"):
        load_catalog(tmp_path)


def test_a_named_pipe_among_the_profiles_is_refused_not_waited_on(profiles_copy) -> None:
    os.mkfifo(profiles_copy / "zz-pipe.yaml")  # reading it used to hang for ever
    with pytest.raises(CatalogError, match=r"zz-pipe\.yaml: not a regular file"):
        load_catalog(profiles_copy)
