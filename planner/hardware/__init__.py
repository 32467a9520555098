"""GPU hardware facts and MIG geometry: the catalog (profiles/), layouts and placements,
their enumeration and tables, resource names, layout diffs."""
