"""The `migplan` command line (also installed as the kubectl plugin `kubectl-migplan`)."""
