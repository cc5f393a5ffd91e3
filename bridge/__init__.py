"""slurm-bridge: the shared core (config, models, errors, Slurm and Kubernetes clients).

Nothing in this package imports a component (scheduler, controller, admission);
an import-linter contract in pyproject.toml keeps it that way.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("slurm-bridge")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
