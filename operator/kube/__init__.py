"""The one small layer through which migplan calls the Kubernetes API: `seam.Kube` names
what callers may ask, one Protocol per API area; `connect.KubeClient` answers with the real
API server, `migplan.operator.sim.api_server.InMemoryCluster` in memory."""
