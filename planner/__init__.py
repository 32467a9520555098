"""Pure MIG planning library: GPU catalog, layouts, planning models, solver and validator.

Nothing in this package talks to Kubernetes or NVML (an import-linter contract enforces it).
"""

from migplan.planner.cp_sat_import import import_cp_model

import_cp_model()
