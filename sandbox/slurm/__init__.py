"""The real Slurm sandbox: a Slurm cluster in a Debian chroot (``launcher`` renders its
config and drives ``slurm-sandbox.sh``, which does the root-level work)."""
