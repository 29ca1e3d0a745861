"""The host read: hardware, GPU selection, busy guard, NVML sampling, the fast health check."""
