"""CP-SAT is imported without pandas, and its pandas helpers still work on the real pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _python(code: str, *, cwd: Path | None = None) -> str:
    """Run `code` in a fresh interpreter (this one may have loaded pandas) and return stdout."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_command_line_starts_without_pandas() -> None:
    said = _python(
        """
        import sys
        import migplan.operator.cli.app
        print("ortools.sat.python.cp_model" in sys.modules, "pandas" in sys.modules)
        """
    )
    assert said == "True False"


def test_series_helpers_use_the_real_pandas() -> None:
    said = _python(
        """
        import sys
        import migplan.planner
        from ortools.sat.python import cp_model
        assert "pandas" not in sys.modules
        import pandas as pd
        model = cp_model.CpModel()
        xs = model.new_int_var_series(name="x", index=pd.Index(["a", "b", "c"]), lower_bounds=0,
                                      upper_bounds=pd.Series([1, 2, 3], index=["a", "b", "c"]))
        model.maximize(sum(xs))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(model) == cp_model.OPTIMAL
        values = solver.values(xs)
        print(type(values).__module__.split(".")[0], values.to_dict())
        """
    )
    assert said == "pandas {'a': 1, 'b': 2, 'c': 3}"


def test_an_ortools_that_needs_more_of_pandas_gets_all_of_it(tmp_path: Path) -> None:
    (tmp_path / "needs_frames.py").write_text(
        "import pandas as pd\nFRAME = pd.DataFrame\nINDEX = pd.Index\n", encoding="utf-8"
    )
    said = _python(
        """
        import sys
        import migplan.planner.cp_sat_import as cp_sat_import
        sys.path.insert(0, ".")
        cp_sat_import.CP_MODEL = "needs_frames"
        cp_sat_import.import_cp_model()
        import needs_frames
        print(needs_frames.FRAME.__module__.split(".")[0], "pandas" in sys.modules)
        """,
        cwd=tmp_path,
    )
    assert said == "pandas True"
