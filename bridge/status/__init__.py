"""``slurm-bridge status``: the operator's view of both sides (:mod:`bridge.status.view` is
the pure join and rendering, :mod:`bridge.status.cli` reads Kubernetes and Slurm)."""
