"""pyinfra operations and facts tested on recorded command outputs (one folder per case)."""
