"""Preflight checks: what on a GPU Operator cluster would make migplan's changes invisible or
unsafe, found before anything is changed (`checks`), from the live cluster or an inventory
file (`facts`)."""
