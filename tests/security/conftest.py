"""The security suite runs against the same real Slurm sandbox as tests/integration."""

from tests.integration.conftest import sandbox, slurm, track_jobs

__all__ = ["sandbox", "slurm", "track_jobs"]
