"""slurm-bridge's sandboxes (test and demo tooling, its own distribution: slurm-bridge-sandbox).

Never shipped with the bridge: the runtime wheel and the image hold none of it, and no
production module imports it (an import-linter contract). ``slurm-bridge sandbox ...`` finds
its commands through the ``slurm_bridge.sandbox`` entry points this distribution declares.
"""
