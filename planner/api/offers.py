"""The node kinds a plan may ask the autoscaler for (spec.scaleOut), resolved against the
catalog."""

from __future__ import annotations

from dataclasses import dataclass

from migplan.planner.api.spec import ScaleOutSpec
from migplan.planner.errors import MigplanInputError
from migplan.planner.hardware.catalog import Catalog, GpuModel


@dataclass(frozen=True)
class Offer:
    """One kind of new node: its name, GPU model, GPUs per node, cost and how many may come."""

    name: str
    model: GpuModel
    gpus: int
    cost: int
    max_nodes: int


def resolve_offers(spec: ScaleOutSpec, catalog: Catalog) -> list[Offer]:
    """The offers of `spec` with their GPU models; MigplanInputError for an unknown model."""
    offers = []
    for n, offer in enumerate(spec.offers):
        try:
            model = catalog.model(offer.gpu_model)
        except MigplanInputError as exc:
            raise MigplanInputError(f"spec.scaleOut.offers[{n}].gpuModel: {exc}") from None
        offers.append(Offer(offer.name, model, offer.gpus_per_node, offer.cost, offer.max_nodes))
    return offers
