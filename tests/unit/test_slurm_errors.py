"""Error classification table: (HTTP status, Slurm error number) -> exception type."""

from __future__ import annotations

import pytest

from bridge.errors import (
    SlurmBusy,
    SlurmError,
    SlurmNotFound,
    SlurmRejected,
    SlurmUnauthorized,
    SlurmUnavailable,
    classify_slurm_error,
)


@pytest.mark.parametrize(
    ("status", "number", "kind"),
    [
        pytest.param(401, 0, SlurmUnauthorized, id="401-plain-text-no-token"),
        pytest.param(403, 0, SlurmUnauthorized, id="403"),
        pytest.param(511, 1007, SlurmUnauthorized, id="511-protocol-auth-error"),
        pytest.param(200, 1007, SlurmUnauthorized, id="1007-even-with-200"),
        pytest.param(422, 6010, SlurmUnauthorized, id="6010-user-nobody"),
        pytest.param(404, 2017, SlurmNotFound, id="404-invalid-job-id"),
        pytest.param(200, 2017, SlurmNotFound, id="2017-in-delete-status"),
        pytest.param(422, 2018, SlurmNotFound, id="2018-invalid-node-name"),
        pytest.param(404, 0, SlurmNotFound, id="404-plain-text"),
        pytest.param(422, 2000, SlurmRejected, id="422-bad-partition"),
        pytest.param(500, 2000, SlurmRejected, id="500-bad-partition-24.11"),
        pytest.param(422, 2014, SlurmRejected, id="422-impossible-config"),
        pytest.param(422, 2045, SlurmRejected, id="422-bad-account"),
        pytest.param(422, 2013, SlurmBusy, id="422-2013-allocate-not-top-priority"),
        pytest.param(422, 2015, SlurmBusy, id="422-2015-allocate-partition-config-not-now"),
        pytest.param(422, 2016, SlurmBusy, id="422-2016-allocate-nodes-busy"),
        pytest.param(422, 2066, SlurmRejected, id="422-bad-qos"),
        pytest.param(500, 2189, SlurmRejected, id="500-external-job-with-script"),
        pytest.param(400, 0, SlurmRejected, id="400-failure-during-parsing"),
        pytest.param(500, 0, SlurmUnavailable, id="500-no-verdict"),
        pytest.param(502, 0, SlurmUnavailable, id="502-proxy"),
        pytest.param(503, 0, SlurmUnavailable, id="503"),
        pytest.param(429, 0, SlurmUnavailable, id="429"),
        pytest.param(502, 1800, SlurmUnavailable, id="502-1800-slurmctld-connect-failure"),
        pytest.param(500, 1802, SlurmUnavailable, id="500-1802-slurmctld-receive-error"),
        pytest.param(500, -1, SlurmUnavailable, id="500-unspecified-during-ctld-restart"),
        pytest.param(422, -1, SlurmRejected, id="422-unspecified-is-a-verdict"),
        pytest.param(500, 104, SlurmUnavailable, id="500-104-connection-reset-ctld-restart"),
        pytest.param(500, 111, SlurmUnavailable, id="500-111-connection-refused"),
        pytest.param(500, 22, SlurmRejected, id="500-22-einval-is-a-verdict"),
        pytest.param(None, 0, SlurmUnavailable, id="no-answer"),
    ],
)
def test_classification_table(status: int | None, number: int, kind: type[SlurmError]) -> None:
    err = classify_slurm_error(
        endpoint="job_submit", status=status, error_number=number, slurm_message="Slurm text"
    )
    assert type(err) is kind
    assert err.status == status
    assert err.endpoint == "job_submit"
    assert "job_submit" in str(err)
    if isinstance(err, SlurmRejected):
        assert err.error_number == number
        assert err.slurm_message == "Slurm text"
