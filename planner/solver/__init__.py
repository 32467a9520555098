"""Exact fleet planning with OR-Tools CP-SAT behind one facade: `plan()`.

Split as variables and constraints (`model.py`), the staged lexicographic objective
(`stages.py`), GPU classes and candidate layouts (`classes.py`, `candidates.py`), and the
mapping of class counts back to GPUs (`mapping.py`).
"""

from migplan.planner.solver.facade import plan

__all__ = ["plan"]
