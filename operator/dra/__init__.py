"""Dynamic Resource Allocation: MIG devices in ResourceSlices, claims as demand and holders."""
