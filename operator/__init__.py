"""The cluster side of migplan: CLI, operator, node agent, NVML adapter and emulator."""
