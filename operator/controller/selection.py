"""Which GPUPartitionPlans an operator acts on: the plans whose labels match its selector.

Two releases of the chart side by side (one per team or node pool) each run an operator; each
acts only on the plans labelled for it (`--plan-selector migplan.io/operator=team-a`). Every
operator still reads every plan where plans must agree: a node claimed by two plans is a
conflict whoever acts on them, and a node cordoned by another operator's plan is not an
orphan to release.

Equality requirements only (a Kubernetes `matchLabels`): the Python client parses no label
selectors, and `key=value[,key=value...]` is what a chart value of labels renders to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from migplan.planner.api.labels import LABEL_KEY, LABEL_VALUE
from migplan.planner.errors import MigplanInputError

_KEY = re.compile(LABEL_KEY)
_VALUE = re.compile(LABEL_VALUE)


@dataclass(frozen=True)
class PlanSelector:
    """Labels a plan must carry for this operator to act on it; none: every plan."""

    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> PlanSelector:
        """`key=value[,key=value...]` (empty: every plan); a malformed one is refused."""
        labels: dict[str, str] = {}
        for requirement in filter(None, (r.strip() for r in text.split(","))):
            key, equals, value = requirement.partition("=")
            key, value = key.strip(), value.strip()
            if not equals or not _KEY.match(key) or not _VALUE.match(value):
                raise MigplanInputError(
                    f"--plan-selector: {requirement!r} is not key=value with a Kubernetes "
                    "label key and value (e.g. migplan.io/operator=team-a)"
                )
            if labels.get(key, value) != value:
                raise MigplanInputError(f"--plan-selector: {key!r} asked for twice")
            labels[key] = value
        return cls(labels)

    def selects(self, labels: Mapping[str, Any] | None) -> bool:
        """Whether a plan with `labels` is this operator's."""
        found = labels or {}
        return all(found.get(k) == v for k, v in self.labels.items())

    def plans(self, plans: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The plans among `plans` this operator acts on."""
        return [p for p in plans if self.selects(p.get("metadata", {}).get("labels"))]

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())) or "every plan"


EVERY_PLAN = PlanSelector()
