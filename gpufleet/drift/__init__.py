"""Drift: what differs on each host from the state the deploy declares, in sentences."""
