"""DRA device selectors: CEL expressions evaluated as the Kubernetes scheduler would.

DeviceClasses and ResourceClaim requests select devices with CEL over `device.driver`,
`device.attributes[domain][name]`, `device.capacity[domain][name]` and
`device.allowMultipleAllocations`. Evaluation uses cel-python (`celpy`); Kubernetes' CEL
library adds quantities (`quantity("10Gi")`, `compareTo`, `isGreaterThan`, ...) and semantic
versions (`semver("550.54.15")`, `major()`, ...), defined here on `kubernetes.utils`'s quantity
parser. An expression that does not compile is the user's input error; one that fails at run
time (an attribute the device lacks) does not select the device, and the failure is kept so a
reason can name it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache, total_ordering
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError
from kubernetes.utils import parse_quantity

from migplan.planner.errors import MigplanInputError

SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)


@total_ordering
@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource quantity (`10Gi`, `1500m`), compared by value."""

    value: Decimal

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """`10Gi` -> Quantity(10737418240); raises ValueError otherwise."""
        try:
            return cls(Decimal(parse_quantity(text)))
        except ValueError as exc:
            raise ValueError(f"{text!r} is not a quantity such as 10Gi: {exc}") from None

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value


@total_ordering
@dataclass(frozen=True)
class SemVer:
    """A semantic version (`550.54.15`); a pre-release sorts before its release."""

    major: int
    minor: int
    patch: int
    pre: str = ""

    @classmethod
    def parse(cls, text: str) -> SemVer:
        """`550.54.15` -> SemVer(550, 54, 15); raises ValueError otherwise."""
        match = SEMVER.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a semantic version such as 1.2.3")
        major, minor, patch, pre = match.groups()
        return cls(int(major), int(minor), int(patch), pre or "")

    def key(self) -> tuple[int, int, int, int, str]:
        """Sort key: a release after its pre-releases."""
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, self.pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SemVer):
            return NotImplemented
        return self.key() < other.key()


def _quantity(text: Any) -> Quantity:
    return Quantity.parse(str(text))


def _semver(text: Any) -> SemVer:
    return SemVer.parse(str(text))


def _compare(a: Any, b: Any) -> celtypes.IntType:
    if type(a) is not type(b) or not isinstance(a, Quantity | SemVer):
        raise TypeError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    return celtypes.IntType((a > b) - (a < b))


def _is(kind: type[Any], parse: Any) -> Any:
    def check(text: Any) -> celtypes.BoolType:
        try:
            parse(text)
        except ValueError:
            return celtypes.BoolType(False)
        return celtypes.BoolType(isinstance(parse(text), kind))

    return check


FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "isQuantity": _is(Quantity, _quantity),
    "semver": _semver,
    "isSemver": _is(SemVer, _semver),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "asInteger": lambda q: celtypes.IntType(int(q.value)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "isInteger": lambda q: celtypes.BoolType(q.value == q.value.to_integral_value()),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "major": lambda v: celtypes.IntType(v.major),
    "minor": lambda v: celtypes.IntType(v.minor),
    "patch": lambda v: celtypes.IntType(v.patch),
}
"""Kubernetes' CEL extensions that device selectors use (k8s.io/apiserver/pkg/cel/library)."""


@dataclass(frozen=True)
class Device:
    """A device as selectors see it: qualified attribute and capacity names per domain."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """domain -> name -> str, int, bool or SemVer."""
    capacity: Mapping[str, Mapping[str, Quantity]] = field(default_factory=dict)
    allow_multiple_allocations: bool = False

    def activation(self) -> dict[str, Any]:
        """The `device` variable of the CEL environment."""
        return {
            "device": celtypes.MapType(
                {
                    celtypes.StringType("driver"): celtypes.StringType(self.driver),
                    celtypes.StringType("attributes"): _domains(self.attributes),
                    celtypes.StringType("capacity"): _domains(self.capacity),
                    celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                        self.allow_multiple_allocations
                    ),
                }
            )
        }


def _value(value: Any) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    return value  # Quantity, SemVer


def _domains(values: Mapping[str, Mapping[str, Any]]) -> celtypes.MapType:
    return celtypes.MapType(
        {
            celtypes.StringType(domain): celtypes.MapType(
                {celtypes.StringType(k): _value(v) for k, v in names.items()}
            )
            for domain, names in values.items()
        }
    )


@dataclass(frozen=True)
class Outcome:
    """Whether a selector selects a device, and the run-time error if it failed."""

    selected: bool
    error: str | None = None


class Selector:
    """One compiled CEL selector expression."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        environment = celpy.Environment()
        try:
            ast = environment.compile(expression)
        except CELParseError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
            raise MigplanInputError(
                f"CEL selector {expression!r} does not compile: {first}"
            ) from None
        self._program = environment.program(ast, functions=FUNCTIONS)

    def evaluate(self, device: Device) -> Outcome:
        """Whether this selector selects `device` (a run-time error selects nothing)."""
        try:
            result = self._program.evaluate(device.activation())
        except Exception as exc:  # celpy raises assorted errors at run time
            return Outcome(False, f"{type(exc).__name__}: {exc}")
        if isinstance(result, CELEvalError):
            return Outcome(False, str(result.args[0]) if result.args else "evaluation error")
        if not isinstance(result, celtypes.BoolType | bool):
            return Outcome(False, f"returned {type(result).__name__}, not a bool")
        return Outcome(bool(result))


@lru_cache(maxsize=1024)
def selector(expression: str) -> Selector:
    """The compiled selector for `expression` (claims repeat a few expressions)."""
    return Selector(expression)


def selects_all(expressions: tuple[str, ...], device: Device) -> Outcome:
    """Whether every expression selects `device` (as a request's selectors combine)."""
    for expression in expressions:
        outcome = selector(expression).evaluate(device)
        if not outcome.selected:
            return outcome
    return Outcome(True)
