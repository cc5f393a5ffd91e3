"""slurm-bridge admission component."""
