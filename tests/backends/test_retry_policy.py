"""Retry classification and waits, on the SDKs' real exception types."""

from __future__ import annotations

import email.utils
import importlib
import random
import time

import pytest

from narrative_eval.backends.retry import (
    BoundedPool,
    RetriesExhausted,
    RetryPolicy,
    call_with_retry,
    classify,
    parse_retry_after,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")



def sdk_http(sdk):
    """The HTTP library an SDK is built on (httpx, or its successor in newer SDK releases)."""
    return importlib.import_module(sdk.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])


httpx = sdk_http(openai)
REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def openai_error(status: int, headers: dict | None = None, code: str = "x") -> Exception:
    body = {"error": {"message": f"status {status}", "type": "error", "code": code}}
    response = httpx.Response(status, headers=headers or {}, json=body, request=REQUEST)
    classes = {401: openai.AuthenticationError, 429: openai.RateLimitError, 500: openai.InternalServerError}
    return classes.get(status, openai.APIStatusError)(f"status {status}", response=response, body=body["error"])


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    waited = parse_retry_after(httpx.Headers({"Retry-After": date}), now=now)
    assert 28.0 <= waited <= 30.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_classification():
    limited = classify(openai_error(429, {"retry-after": "2"}))
    assert limited.retryable and not limited.fatal and limited.retry_after == 2.0
    assert classify(openai_error(500)).retryable
    auth = classify(openai_error(401))
    assert not auth.retryable and auth.fatal
    quota = classify(openai_error(429, code="insufficient_quota"))
    assert not quota.retryable and quota.fatal and quota.message.startswith("spend limit")
    assert not classify(openai_error(400)).retryable
    assert classify(openai.APIConnectionError(request=REQUEST)).retryable
    assert classify(openai.APITimeoutError(request=REQUEST)).retryable
    assert classify(httpx.ConnectTimeout("slow")).retryable
    http = sdk_http(anthropic)
    request = http.Request("POST", "http://127.0.0.1/v1/messages")
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}}
    overloaded = anthropic.APIStatusError("overloaded", response=http.Response(529, json=body, request=request), body=body)
    assert classify(overloaded).retryable
    billing = {"type": "error", "error": {"type": "billing_error", "message": "Your credit balance is too low"}}
    no_credit = anthropic.BadRequestError("billing", response=http.Response(400, json=billing, request=request), body=billing)
    assert classify(no_credit).fatal


def test_call_with_retry_honours_retry_after_and_bounds_attempts():
    waits: list[float] = []
    failures = [openai_error(429, {"retry-after": "7"}), openai_error(500)]

    def flaky():
        if failures:
            raise failures.pop(0)
        return "done"

    policy = RetryPolicy(max_attempts=5, base_delay=0.5, max_delay=4.0)
    assert call_with_retry(flaky, policy, sleep=waits.append, rng=random.Random(1)) == "done"
    assert waits[0] == 7.0  # the server's wait, not the backoff
    assert 0.0 <= waits[1] <= 1.0  # full jitter on base_delay * 2**1

    waits.clear()
    with pytest.raises(RetriesExhausted) as exhausted:
        call_with_retry(lambda: (_ for _ in ()).throw(openai_error(503)), policy, sleep=waits.append)
    assert exhausted.value.attempts == 5 and len(waits) == 4

    with pytest.raises(RetriesExhausted) as final:
        call_with_retry(lambda: (_ for _ in ()).throw(openai_error(401)), policy, sleep=waits.append)
    assert final.value.attempts == 1 and final.value.failure.fatal


def test_total_wait_budget_gives_up_early():
    waits: list[float] = []
    policy = RetryPolicy(max_attempts=10, max_total_wait=5.0)
    with pytest.raises(RetriesExhausted) as exhausted:
        call_with_retry(lambda: (_ for _ in ()).throw(openai_error(429, {"retry-after": "60"})), policy, sleep=waits.append)
    assert waits == [] and exhausted.value.attempts == 1


def test_bounded_pool_gives_every_result_with_its_index_and_keeps_the_bound():
    import threading

    active, peak = 0, 0
    lock = threading.Lock()
    # The first three items wait for each other: the pool must have three in flight at once, whatever the machine's
    # speed (a short sleep instead let one thread finish before the next started on a busy machine).
    together = threading.Barrier(3, timeout=600)

    def work(item: int) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        if item < 3:
            together.wait()
        with lock:
            active -= 1
        return item * item

    pool = BoundedPool(3)
    done = list(pool.as_done(work, list(range(12))))
    assert sorted(done) == [(i, i * i) for i in range(12)]  # every item once, with its own index
    pool.close()
    assert peak == 3


def test_remote_chunk_holds_several_requests_per_slot_in_flight():
    """A study hands a remote backend 16 × max_concurrency requests per call unless batch_size says otherwise."""
    from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend
    from narrative_eval.records import ModelSpec

    def chunk(**options) -> int:
        spec = ModelSpec(id="served", backend="openai_compatible", weights="served",
                         options={"base_url": "http://127.0.0.1:9/v1", **options})
        backend = OpenAICompatibleBackend(spec)
        backend.close()
        return backend.batch_size

    assert chunk() == 64  # max_concurrency defaults to 4
    assert chunk(max_concurrency=8) == 128
    assert chunk(max_concurrency=8, batch_size=100) == 100
    assert chunk(max_concurrency=8, batch_size=2) == 8  # never fewer than may be in flight
