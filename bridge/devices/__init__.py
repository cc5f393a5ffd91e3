"""The device logic: which DRA devices a pod gets, which GRES a node has, and the MIG
table (pure). This is allocation, not translation: translation turns a pod's requests
into Slurm's CPUs and GRES (:mod:`bridge.translate.dra`); these modules map what Slurm
then gave a job onto the node's ResourceSlices, and compare a node's devices with its
Slurm GRES.

- :mod:`~bridge.devices.allocation`: Slurm's cores and GRES indices (or counts) onto the
  node's devices, per claim, exactly or not at all;
- :mod:`~bridge.devices.node_gres`: a node's devices as Slurm GRES, and whether Slurm and
  Kubernetes agree (the Node condition ``SlinkySlurmGRESCompatible``);
- :mod:`~bridge.devices.packing`: the one packer of a node's GPU devices (MIG slices and
  partitionable devices within their GPUs' counters);
- :mod:`~bridge.devices.taints`: DRA device taints and tolerations (KEP-5055);
- :mod:`~bridge.devices.mig`: NVIDIA's MIG table (GPU models, profiles, counters).

Layered over translation (which never imports this package), pure like it: no I/O, no
client, no clock (import-linter contracts in pyproject.toml).
"""
