"""slurm-bridge scheduler component."""
