"""Performance floors: published references, derived floors, their checks, calibration, NCCL."""
