"""The local orchestrator: one run as `tfxflow run` makes it (run lock, recovery, the up-to-date shortcut, exit
statuses) and LocalDagRunner with progress, heartbeat and the terminal summary."""
