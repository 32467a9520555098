"""The one small layer through which migplan calls the Kubernetes API."""
