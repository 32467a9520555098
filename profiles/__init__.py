"""Data package: one YAML file per GPU model (see profiles/README.md)."""
