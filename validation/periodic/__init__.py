"""The periodic runner a systemd timer starts on each host: its checks, DCGM and baseline."""
