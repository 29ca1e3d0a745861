"""The integration tier: end-to-end tests against the sandbox fleet (root, systemd-nspawn)."""
