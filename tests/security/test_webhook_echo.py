"""Issue #30, finding 8: the webhook no longer logs or echoes uid, user and namespace
unclipped, and reviews naming many namespaces cost the API server a bounded number of
namespace GETs.

A 2 MiB uid wrote a 2.5 MB log line, a 2 MiB namespace came back in the answer, and 2,000
distinct namespaces caused 2,001 GETs. The API server sends a UUID as the uid, a DNS-1123
label as the namespace and a bounded name: a review with anything else is not from an API
server and gets a short 400 (it never reaches a log line, an answer or a namespace lookup);
a user name is cut in the log line; distinct namespaces are looked up at most
MAX_CONCURRENT_FETCHES at a time, each once (single-flight, cached, bounded)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
import structlog

from admission.review import decode_review
from admission.server import LOG_USER_CHARS
from bridge.errors import InvalidInput
from bridge.kube.cached import MAX_CONCURRENT_FETCHES
from bridge.kube.namespaces import CachedNamespaceLabels
from tests.admission_helpers import make_pod, make_review
from tests.fake_clock import FakeClock
from tests.security.conftest import StartWebhook, Webhook

BIG = 2 * 1024 * 1024


async def _post(hook: Webhook, body: dict[str, Any]) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            hook.url + "/validate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            ssl=hook.client_ctx(),
        ) as r,
    ):
        return r.status, await r.read()


def _longest_log_line(logs: list[dict[str, Any]]) -> int:
    return max((len(json.dumps(entry, default=str)) for entry in logs), default=0)


@pytest.mark.parametrize("where", ["uid", "namespace", "name", "user"])
async def test_a_two_mib_field_gets_a_short_400_and_a_short_log_line(
    start_webhook: StartWebhook, where: str
) -> None:
    hook = await start_webhook(maxRequestBytes=3 * 1024 * 1024)
    review = make_review(make_pod())
    huge = "a" * BIG
    if where == "user":
        review["request"]["userInfo"]["username"] = huge
    else:
        review["request"][where] = huge
    with structlog.testing.capture_logs() as logs:
        status, body = await _post(hook, review)
    assert status == 400
    assert len(body) < 1_000
    assert huge[:1_000] not in body.decode()
    assert _longest_log_line(logs) < 4_000


async def test_a_long_user_name_is_cut_in_the_log_line(webhook: Webhook) -> None:
    review = make_review(make_pod(annotations={"slurmjob.slinky.slurm.net/user-id": "0"}))
    review["request"]["userInfo"]["username"] = "u" * 1_000
    with structlog.testing.capture_logs() as logs:
        status, _ = await _post(webhook, review)
    assert status == 200
    users = [e["user"] for e in logs if e.get("event") == "admission_review"]
    assert users
    assert all(len(u) <= LOG_USER_CHARS for u in users)


@pytest.mark.parametrize("namespace", ["Team-A", "team_a", "a" * 64, "team\na", "-team", "team.a"])
def test_a_namespace_an_api_server_never_sends_is_refused_before_any_lookup(
    namespace: str,
) -> None:
    with pytest.raises(InvalidInput) as e:
        decode_review(json.dumps(make_review(make_pod(), namespace=namespace)).encode())
    assert e.value.field == "request.namespace"


async def test_two_thousand_distinct_namespaces_are_looked_up_a_few_at_a_time_once_each() -> None:
    in_flight = peak = 0
    fetched: list[str] = []

    async def fetch(name: str) -> Mapping[str, str] | None:
        nonlocal in_flight, peak
        fetched.append(name)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return None

    cache = CachedNamespaceLabels(fetch, FakeClock(), 30)
    names = [f"ns-{i}" for i in range(2_000)]
    await asyncio.gather(*(cache.labels(n) for n in names * 2))
    assert sorted(fetched) == sorted(names)
    assert peak <= MAX_CONCURRENT_FETCHES
