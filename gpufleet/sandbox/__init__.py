"""The sandbox fleet: systemd-nspawn hosts, their network, stand-in upstreams and snapshots."""
