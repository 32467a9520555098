"""ResourceClaims: which MIG instances they hold, and which profiles a pending one could use.

A claim's request names a DeviceClass and may add CEL selectors; both must select a device.
To turn a pending claim into planner demand, each MIG profile of each covered GPU model is
shown to the selectors as the device NVIDIA's driver would publish for it (its attributes
taken from a device of that model the cluster already publishes, where there is one), and
the profiles selected become the claim's alternatives (either/or demand). A request with
`firstAvailable` subrequests is served by any of them; `allocationMode: All` and admin access
are not capacity requests and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migplan.operator.dra.cel import Device, Quantity
from migplan.operator.dra.devices import DRIVER, DeviceKind, SliceDevice, capacities
from migplan.operator.dra.helper import (
    Budget,
    BudgetSpent,
    CelUnavailable,
    CompileError,
    Evaluator,
    evaluator,
)
from migplan.planner.api.inventory import ClaimRequest
from migplan.planner.demand import profile_order
from migplan.planner.errors import UnknownModelError
from migplan.planner.hardware.catalog import Catalog, GpuModel
from migplan.planner.hardware.layout import Instance

PER_DEVICE = frozenset({"uuid", "parentUUID", "pcieBusID", "index", "minor", "pcieRoot"})
"""Attributes that name one device, not what a device of that model and profile is."""


@dataclass(frozen=True)
class Held:
    """A MIG instance an allocated claim holds, and the pods using it (several where pods
    share the claim)."""

    node: str
    gpu_uuid: str | None
    gpu_minor: int | None
    instance: Instance
    pods: tuple[str, ...]

    @property
    def pod(self) -> str:
        """The first pod: the one the inventory names as the instance's user."""
        return self.pods[0]

    @property
    def others(self) -> tuple[str, ...]:
        """The pods besides the first: destroying the instance evicts them too."""
        return self.pods[1:]


def _pods_of(claim: Mapping[str, Any]) -> list[str]:
    namespace = claim["metadata"].get("namespace", "")
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return [f"{namespace}/{r['name']}" for r in reserved if r.get("resource") == "pods"]


def held_instances(
    claims: Iterable[Mapping[str, Any]], devices: Sequence[SliceDevice]
) -> list[Held]:
    """Instances allocated to claims, each with a pod the claim is reserved for (a claim no
    pod uses yet is named as `namespace/claim`, so nothing destroys what it was given)."""
    by_key = {d.key: d for d in devices}
    gpu_uuid = {(d.node, d.minor): d.uuid for d in devices if d.kind is DeviceKind.GPU}
    held = []
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        pods = _pods_of(claim) or [
            f"{claim['metadata'].get('namespace', '')}/{claim['metadata']['name']}"
        ]
        for result in results:
            key = (result.get("driver"), result.get("pool"), result.get("device"))
            device = by_key.get(key)
            if device is None or device.instance is None:
                continue
            uuid = device.parent_uuid or gpu_uuid.get((device.node, device.minor))
            held.append(Held(device.node, uuid, device.minor, device.instance, tuple(pods)))
    return held


def _template_attributes(
    model: GpuModel, devices: Sequence[SliceDevice], catalog: Catalog
) -> dict[str, Any]:
    """Attributes every device of `model` shares, from one the cluster publishes."""
    for d in devices:
        product = d.attribute("productName")
        if not isinstance(product, str):
            continue
        try:
            if catalog.model(product).model != model.model:
                continue
        except UnknownModelError:
            continue
        shared = d.device.attributes.get(d.device.driver, {})
        return {k: v for k, v in shared.items() if k not in PER_DEVICE}
    return {
        "productName": model.products[0].nvml,
        "brand": "Nvidia",
        "architecture": model.architecture.capitalize(),
    }


class SelectorsUnusable(Exception):
    """Selectors that cannot be evaluated this pass: they do not compile, the pass's CEL
    time is spent, or the helper is unavailable. The message says which, not the text."""


@dataclass
class Candidates:
    """Per covered GPU model, the device each of its profiles would be."""

    by_model: dict[str, dict[str, Device]] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    evaluator: Evaluator = field(default_factory=evaluator)

    def profiles(self, selectors: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """Profiles on any model that every selector selects, smallest first, and the
        run-time errors met (an attribute the device lacks, ...); raises SelectorsUnusable."""
        shown = [(p, d) for devices in self.by_model.values() for p, d in devices.items()]
        if not shown:
            return [], []
        try:
            outcomes = self.evaluator.match(selectors, [d for _, d in shown], budget=self.budget)
        except CompileError as exc:
            raise SelectorsUnusable(f"a selector does not compile: {str(exc)[:200]}") from None
        except (BudgetSpent, CelUnavailable) as exc:
            raise SelectorsUnusable(str(exc)) from None
        chosen: set[str] = set()
        errors: list[str] = []
        for (profile, _), outcome in zip(shown, outcomes, strict=True):
            if outcome.selected:
                chosen.add(profile)
            elif outcome.error and outcome.error not in errors:
                errors.append(outcome.error)
        return sorted(chosen, key=profile_order), errors


def candidates(
    models: Iterable[GpuModel], devices: Sequence[SliceDevice], catalog: Catalog
) -> Candidates:
    """The device every profile of every model in `models` would be, as selectors see it."""
    published = {
        (d.attribute("productName"), d.attribute("profile")): d for d in devices if d.instance
    }
    result = Candidates()
    for model in sorted(set(models), key=lambda m: m.model):
        shared = _template_attributes(model, devices, catalog)
        per_profile = {}
        for profile in model.profiles:
            real = published.get((shared.get("productName"), profile.name))
            capacity: dict[str, Quantity] = {}
            if real is not None:
                capacity = {
                    k: v
                    for k, v in real.device.capacity.get(real.device.driver, {}).items()
                    if not k.startswith("memorySlice")
                }
            for name, value in capacities(profile).items():
                capacity.setdefault(name, Quantity.parse(str(value)))
            per_profile[profile.name] = Device(
                driver=DRIVER,
                attributes={DRIVER: {**shared, "type": "mig", "profile": profile.name}},
                capacity={DRIVER: capacity},
            )
        result.by_model[model.model] = per_profile
    return result


@dataclass(frozen=True)
class ClassInfo:
    """A DeviceClass: its selectors and the extended resource it stands for, if any."""

    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None = None


def device_classes(raw: Iterable[Mapping[str, Any]]) -> dict[str, ClassInfo]:
    """DeviceClasses by name."""
    found = {}
    for c in raw:
        spec = c.get("spec") or {}
        name = str(c["metadata"]["name"])
        found[name] = ClassInfo(
            name=name,
            selectors=_expressions(spec.get("selectors")),
            extended_resource=spec.get("extendedResourceName"),
        )
    return found


def _expressions(selectors: Any) -> tuple[str, ...]:
    return tuple(
        str(s["cel"]["expression"])
        for s in selectors or []
        if (s.get("cel") or {}).get("expression")
    )


@dataclass
class ClaimReader:
    """Turns pending claims into ClaimRequests, remembering why requests were skipped."""

    classes: Mapping[str, ClassInfo]
    candidates: Candidates
    notes: list[str] = field(default_factory=list)

    def _one(self, where: str, request: Mapping[str, Any]) -> tuple[int, list[str]] | None:
        if request.get("allocationMode", "ExactCount") != "ExactCount" or request.get(
            "adminAccess"
        ):
            return None
        cls = self.classes.get(str(request.get("deviceClassName", "")))
        if cls is None:
            self.notes.append(f"{where}: DeviceClass {request.get('deviceClassName')!r} not found")
            return None
        selectors = cls.selectors + _expressions(request.get("selectors"))
        try:
            profiles, errors = self.candidates.profiles(selectors)
        except SelectorsUnusable as exc:
            self.notes.append(f"{where}: skipped: {exc}")
            return None
        if not profiles and errors:
            self.notes.append(f"{where}: selectors failed: {errors[0]}")
        return int(request.get("count", 1)), profiles

    def requests(self, claim: Mapping[str, Any], *, where: str) -> list[ClaimRequest]:
        """What a claim's spec asks for, as ClaimRequests (MIG requests only)."""
        spec = (claim.get("spec") or {}).get("devices") or {}
        found = []
        for request in spec.get("requests") or []:
            name = str(request.get("name", ""))
            if "exactly" in request:
                got = self._one(f"{where} request {name}", request["exactly"])
            elif request.get("firstAvailable"):
                options = [
                    got
                    for sub in request["firstAvailable"]
                    if (got := self._one(f"{where} request {name}/{sub.get('name')}", sub))
                    and got[1]
                ]
                # Any subrequest serves; subrequests asking for other counts are served by
                # the first of them only (the scheduler tries them in order).
                count = options[0][0] if options else 0
                merged = sorted(
                    {p for n, ps in options if n == count for p in ps}, key=profile_order
                )
                got = (count, merged) if options else None
            else:
                got = self._one(f"{where} request {name}", request)  # v1beta1 shape
            if got and got[1] and got[0] > 0:
                found.append(
                    ClaimRequest(
                        claim=str(claim["metadata"]["name"]),
                        request=name,
                        count=got[0],
                        profiles=tuple(got[1]),
                    )
                )
        return found

    def extended(self, requests: Mapping[str, int]) -> list[ClaimRequest]:
        """Extended resources a DeviceClass stands for (DRA extended-resource mapping)."""
        by_resource: dict[str, ClassInfo] = {}
        for cls in self.classes.values():
            by_resource[f"deviceclass.resource.kubernetes.io/{cls.name}"] = cls
            if cls.extended_resource:
                by_resource[cls.extended_resource] = cls
        found = []
        for resource, quantity in sorted(requests.items()):
            mapped = by_resource.get(resource)
            if mapped is None or quantity <= 0:
                continue
            try:
                profiles, _ = self.candidates.profiles(mapped.selectors)
            except SelectorsUnusable as exc:
                self.notes.append(f"DeviceClass {mapped.name}: skipped: {exc}")
                continue
            if profiles:
                found.append(
                    ClaimRequest(
                        claim=mapped.name,
                        request=resource,
                        count=quantity,
                        profiles=tuple(profiles),
                    )
                )
        return found


def claim_from_template(
    template: Mapping[str, Any], *, name: str, namespace: str
) -> dict[str, Any]:
    """The claim a ResourceClaimTemplate will make (its spec), for a pod not created yet."""
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": (template.get("spec") or {}).get("spec") or {},
    }


def pod_claims(
    pod: Any,
    *,
    claims: Mapping[tuple[str, str], Mapping[str, Any]],
    templates: Mapping[tuple[str, str], Mapping[str, Any]],
) -> list[tuple[str, Mapping[str, Any]]]:
    """(claim name, claim) for each ResourceClaim a pod references that is not allocated yet;
    a claim still to be made from a template is read from the template's spec."""
    namespace = pod.metadata.namespace
    made = {
        s.name: s.resource_claim_name
        for s in (pod.status.resource_claim_statuses or [])
        if s.resource_claim_name
    }
    found = []
    for ref in pod.spec.resource_claims or []:
        name = ref.resource_claim_name or made.get(ref.name)
        claim = claims.get((namespace, name)) if name else None
        if claim is None and ref.resource_claim_template_name:
            template = templates.get((namespace, ref.resource_claim_template_name))
            if template is not None:
                generated = f"{pod.metadata.name}-{ref.name}"
                claim = claim_from_template(template, name=generated, namespace=namespace)
        if claim is None or (claim.get("status") or {}).get("allocation"):
            continue
        found.append((str(claim["metadata"]["name"]), claim))
    return found
