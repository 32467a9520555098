"""tests/planner/solver helpers (linear_problems.py) are imported by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
