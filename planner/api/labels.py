"""Kubernetes label keys and values, as the API server checks them (apimachinery
validation.IsQualifiedName / IsValidLabelValue): patterns for pydantic fields and regexes."""

from __future__ import annotations

import hashlib

LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
LABEL_KEY = rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{LABEL_NAME}$"
"""An optional DNS-subdomain prefix and `/`, then a name."""
LABEL_VALUE = rf"^({LABEL_NAME})?$"


def label_value(value: str) -> str:
    """`value` as a label value: one longer than 63 characters is cut and ends in a digest of
    the whole, so distinct long names stay distinct."""
    if len(value) <= 63:
        return value
    return value[:42] + "-" + hashlib.sha256(value.encode()).hexdigest()[:20]
