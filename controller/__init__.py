"""slurm-bridge controller component."""
