"""Import OR-Tools' CP-SAT layer without loading pandas until something really uses pandas.

`ortools.sat.python.cp_model` imports pandas at the top for its `*_series` helpers, which
the planner never calls, and names `pd.Index`/`pd.Series` in annotations that Python
evaluates while the module loads. Loading pandas costs about 0.24 s and 42 MiB on every
`migplan` command and in the operator (measured on this project's 2-core machine, pandas
3.1: `python -c "import pandas"` 0.33 s / 68 MiB against numpy's 0.09 s / 26 MiB), a tenth of
a 2,000-GPU preview. So CP-SAT is imported once with a stand-in that holds only those two
names, and its `pd` is then pointed at a handle that imports the real pandas on first use:
every `*_series` helper still works, on real pandas (tests/planner/test_cp_sat_import.py).
Where pandas is already loaded, or the stand-in does not satisfy the installed OR-Tools, the
module is imported the ordinary way.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

CP_MODEL = "ortools.sat.python.cp_model"


class _ImportTimeOnly:
    """What `pd.Index` and `pd.Series` name while CP-SAT's module body runs (annotations)."""


class _RealPandasOnUse(types.ModuleType):
    """Stands where CP-SAT keeps `pd`; the first attribute read imports and returns pandas'."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)


def import_cp_model() -> None:
    """Import CP-SAT's Python layer, deferring pandas (see the module docstring).

    Idempotent, and does nothing once CP-SAT or pandas is loaded."""
    if CP_MODEL in sys.modules or "pandas" in sys.modules:
        return
    stand_in = types.ModuleType("pandas")
    stand_in.Index = _ImportTimeOnly  # type: ignore[attr-defined]
    stand_in.Series = _ImportTimeOnly  # type: ignore[attr-defined]
    sys.modules["pandas"] = stand_in
    try:
        module = importlib.import_module(CP_MODEL)
    except AttributeError:
        sys.modules.pop(CP_MODEL, None)
        module = None
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
    if module is None:
        importlib.import_module(CP_MODEL)
        return
    vars(module)["pd"] = _RealPandasOnUse("pandas")
