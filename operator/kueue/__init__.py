"""Kueue: pending Workloads as demand, and the AdmissionCheck controller migplan runs."""
