"""Where the placeholders that ask the autoscaler for nodes live and what they run (kept
apart from `scale_out.py`, which needs the Kubernetes client, so the CLI can name the
defaults without loading it)."""

from __future__ import annotations

from dataclasses import dataclass

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class ScaleOutSettings:
    """Where placeholders live and what they run."""

    namespace: str = "migplan-system"
    priority_class: str = "migplan-placeholder"
    """A PriorityClass below every real workload's (the chart makes it, value -10,
    preemptionPolicy Never)."""
    image: str = PAUSE_IMAGE
