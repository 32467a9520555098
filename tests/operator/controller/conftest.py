"""The controller's tests share the scene-setting helpers of `test_reconciler.py`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
