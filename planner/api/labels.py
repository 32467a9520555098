"""Kubernetes label keys and values, as the API server checks them (apimachinery
validation.IsQualifiedName / IsValidLabelValue): patterns for pydantic fields and regexes."""

from __future__ import annotations

LABEL_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
LABEL_KEY = rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{LABEL_NAME}$"
"""An optional DNS-subdomain prefix and `/`, then a name."""
LABEL_VALUE = rf"^({LABEL_NAME})?$"
