"""Base for the planner's pydantic models, and one-line errors for files that break them.

Models are read and written with camelCase names (as Kubernetes manifests are) and use
snake_case in code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from migplan.planner.errors import MigplanInputError


class CamelModel(BaseModel):
    """Immutable, strict about unknown fields, read and written with camelCase names."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


def format_location(loc: tuple[int | str, ...], data: Any) -> str:
    """`('profiles', 2, 'starts')` -> `profiles[2] (1g.10gb).starts`, naming list items."""
    parts: list[str] = []
    node = data
    for item in loc:
        if isinstance(item, int):
            label = f"[{item}]"
            try:
                node = node[item]
            except (IndexError, KeyError, TypeError):
                node = None
            if isinstance(node, Mapping) and isinstance(node.get("name"), str):
                label += f" ({node['name']})"
            parts.append(label)
        else:
            parts.append(f".{item}" if parts else item)
            node = node.get(item) if isinstance(node, Mapping) else None
    return "".join(parts)


M = TypeVar("M", bound=BaseModel)


def parse_model(
    cls: type[M], data: Any, *, source: str, error: type[MigplanInputError] = MigplanInputError
) -> M:
    """Validate `data` as `cls`; on failure raise `error` with one line naming source and field.

    Whole-model checks put their own location at the start of their message.
    """
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = first["msg"].removeprefix("Value error, ")
        if first["loc"]:
            message = f"{format_location(tuple(first['loc']), data)}: {message}"
        raise error(f"{source}: {message}{more}") from None
