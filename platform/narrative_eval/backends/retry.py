"""Retries and bounded concurrency for backends that talk to a server.

One retry layer for every HTTP backend (the SDKs' own retries are switched off):
exponential backoff with full jitter on 429, 408/409, 5xx, timeouts and connection
errors, honouring a server's `Retry-After`; never a retry on an authentication error or an
exhausted spend limit. A request that still fails comes back as an error reply
(`finish_reason='error'`) so a sweep goes on and the cache never stores it.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar

from narrative_eval.backends.base import Backend, Conversation, params_per_request
from narrative_eval.records import GenerationParams, ModelSpec, Reply

T = TypeVar("T")
Item = TypeVar("Item")

# Status codes a later attempt can cure: request timeout, conflict (Anthropic asks for a
# retry), rate limit, and every server-side failure (incl. Anthropic's 529 overloaded).
RETRYABLE_STATUS = frozenset({408, 409, 429})
# Error codes/types the providers use for an exhausted balance or spend limit; waiting never
# cures these, so they are final even when they arrive as a 429.
SPEND_LIMIT_CODES = frozenset(
    {"insufficient_quota", "billing_error", "billing_hard_limit_reached", "credit_balance_too_low"}
)
SPEND_LIMIT_PHRASES = ("insufficient_quota", "exceeded your current quota", "credit balance", "spend limit", "billing")
# A remote backend's default chunk (`batch_size`) in requests per slot of `max_concurrency`. Slots idle
# while a chunk's slowest replies finish: against `vllm serve` on 2 cores with 8 slots, chunks of 8
# gave 59 tokens/s and one chunk of 200 gave 72. Replies are cached as they arrive, so a larger
# chunk risks nothing on a kill; it only makes the study's progress coarser.
CHUNK_PER_SLOT = 16
# Exception class names (matched along the MRO) that mean the request never got an answer.
TRANSPORT_ERROR_NAMES = frozenset(
    {"APIConnectionError", "APITimeoutError", "TimeoutException", "TransportError", "RemoteProtocolError"}
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one request."""

    max_attempts: int = 6
    """Attempts in total, the first included."""
    base_delay: float = 1.0
    """Backoff scale in seconds: attempt k waits up to base_delay * 2**k."""
    max_delay: float = 60.0
    """Cap on one computed backoff wait (a server's Retry-After may ask for more)."""
    max_total_wait: float = 600.0
    """Give up once the waits of one request would add up to more than this many seconds."""

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RetryPolicy:
        """Read `max_attempts`, `retry_base_delay`, `retry_max_delay`, `retry_max_total_wait` from model options."""
        return cls(
            max_attempts=int(options.get("max_attempts", cls.max_attempts)),
            base_delay=float(options.get("retry_base_delay", cls.base_delay)),
            max_delay=float(options.get("retry_max_delay", cls.max_delay)),
            max_total_wait=float(options.get("retry_max_total_wait", cls.max_total_wait)),
        )

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter wait before retry number `attempt` (0-based)."""
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


@dataclass(frozen=True)
class Failure:
    """What went wrong with one attempt, as far as retrying is concerned."""

    retryable: bool
    """True when another attempt may succeed."""
    fatal: bool
    """True for authentication and spend-limit errors: every later request would fail the same way."""
    status: int | None
    """HTTP status, when the server answered."""
    retry_after: float | None
    """Seconds the server asked us to wait, when it said."""
    message: str
    """One-line description for the error reply (never contains the API key)."""


class RetriesExhausted(RuntimeError):
    """Raised by `call_with_retry` when the last attempt failed; carries the classified failure."""

    def __init__(self, failure: Failure, attempts: int):
        super().__init__(failure.message)
        self.failure = failure
        """The last attempt's failure."""
        self.attempts = attempts
        """Attempts made."""


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` given as seconds or an HTTP date."""
    if headers is None:
        return None
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    milliseconds = getter("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = getter("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return max(0.0, (when - current).total_seconds())


def _error_body_fields(error: BaseException) -> tuple[str, str]:
    """(code or type, message) from an SDK error's JSON body, whichever provider shaped it."""
    body = getattr(error, "body", None)
    code, message = "", ""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            code = str(inner.get("code") or inner.get("type") or "")
            message = str(inner.get("message") or "")
    code = code or str(getattr(error, "code", "") or getattr(error, "type", "") or "")
    return code, message


def _is_spend_limit(status: int | None, code: str, text: str) -> bool:
    if status == 402 or code in SPEND_LIMIT_CODES:
        return True
    lowered = text.lower()
    return status in (400, 403, 429) and any(phrase in lowered for phrase in SPEND_LIMIT_PHRASES)


def classify(error: BaseException) -> Failure:
    """Decide whether an exception from an SDK (openai, anthropic, httpx) deserves another attempt."""
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        status = None
    response = getattr(error, "response", None)
    retry_after = parse_retry_after(getattr(response, "headers", None))
    code, body_message = _error_body_fields(error)
    text = f"{body_message} {error}"
    label = type(error).__name__
    summary = f"{label}" + (f" (HTTP {status})" if status else "") + f": {body_message or error}"
    if _is_spend_limit(status, code, text):
        return Failure(False, True, status, None, "spend limit: " + summary)
    if status in (401, 403):
        return Failure(False, True, status, None, "authentication: " + summary)
    if status is not None:
        retryable = status in RETRYABLE_STATUS or status >= 500
        return Failure(retryable, False, status, retry_after, summary)
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & TRANSPORT_ERROR_NAMES or isinstance(error, (TimeoutError, ConnectionError)):
        return Failure(True, False, None, None, summary)
    return Failure(False, False, None, None, summary)


def call_with_retry(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> T:
    """Run `call` until it succeeds, retrying what `classify` allows; raise RetriesExhausted otherwise."""
    rng = rng or random.Random()
    waited = 0.0
    attempt = 0
    while True:
        try:
            return call()
        except Exception as error:  # noqa: BLE001 - every failure is classified, the unknown ones are final
            failure = classify(error)
            attempt += 1
            if not failure.retryable or attempt >= policy.max_attempts:
                raise RetriesExhausted(failure, attempt) from error
            wait = failure.retry_after if failure.retry_after is not None else policy.backoff(attempt - 1, rng)
            if waited + wait > policy.max_total_wait:
                raise RetriesExhausted(failure, attempt) from error
            sleep(wait)
            waited += wait


class BoundedPool:
    """At most `max_concurrency` requests of one backend in flight; results come as they finish, with their index."""

    def __init__(self, max_concurrency: int):
        self.max_concurrency = max(1, int(max_concurrency))
        """Worker threads, i.e. requests in flight at once."""
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def as_done(self, work: Callable[[Item], T], items: Sequence[Item]) -> Iterator[tuple[int, T]]:
        """(index, result) of each item as its work finishes; closing the iterator cancels what has not started."""
        if len(items) <= 1 or self.max_concurrency == 1:
            for index, item in enumerate(items):
                yield index, work(item)
            return
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="backend-request")
            futures = {self._executor.submit(work, item): index for index, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None


class RemoteBackend(Backend):
    """Base of the backends that send each conversation as one request to a server.

    Requests carry their own params (per_request_params), so a chunk of differently seeded requests is
    sent concurrently rather than grouped into one-request calls. Options: `max_concurrency` (4),
    the requests in flight at once; `batch_size` (16 × max_concurrency, at least max_concurrency),
    the requests a study hands over per call. Each reply is cached as it arrives.

    Subclasses implement `_request` (one attempt, raising the SDK's exception on failure);
    this class adds the retry policy, the per-backend concurrency bound, and turns a final
    failure into an error reply. After an authentication or spend-limit error the backend
    answers every later request with that error at once instead of sending it.
    """

    per_request_params = True
    hosted = True

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        self.policy = RetryPolicy.from_options(spec.options)
        """Retry settings read from the model options."""
        self.pool = BoundedPool(int(spec.options.get("max_concurrency", 4)))
        """Bounded worker pool for this backend's requests."""
        # Never fewer requests than slots, or the pool would idle (CHUNK_PER_SLOT says why the default is larger).
        chosen = int(spec.options.get("batch_size") or CHUNK_PER_SLOT * self.pool.max_concurrency)
        self.batch_size = max(chosen, self.pool.max_concurrency)
        self.fatal: Failure | None = None
        """The authentication/spend-limit failure that stopped this backend, if any."""

    @abstractmethod
    def _request(self, conversation: Conversation, params: GenerationParams) -> Reply:
        """Send one request once; raise on any failure."""

    def _request_with_retry(self, conversation: Conversation, params: GenerationParams) -> Reply:
        if self.fatal is not None:
            return Reply(text="", finish_reason="error", error=self.fatal.message + " (not sent)")
        start = time.perf_counter()
        try:
            return call_with_retry(lambda: self._request(conversation, params), self.policy)
        except RetriesExhausted as exhausted:
            if exhausted.failure.fatal:
                self.fatal = exhausted.failure
            return Reply(
                text="",
                finish_reason="error",
                seconds=time.perf_counter() - start,
                error=f"{exhausted.failure.message} [after {exhausted.attempts} attempt(s)]",
            )

    def generate(
        self, conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]
    ) -> list[Reply]:
        """Every request in flight at once up to max_concurrency, each with its own params (and seed)."""
        done = dict(pair for group in self.replies_as_done(conversations, params) for pair in group)
        return [done[i] for i in range(len(conversations))]

    def replies_as_done(
        self, conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]
    ) -> Iterator[list[tuple[int, Reply]]]:
        """Each reply as it arrives, so the request cache keeps it even if the chunk never finishes."""
        per_request = params_per_request(conversations, params)
        pairs = list(zip(conversations, per_request))
        for index, reply in self.pool.as_done(lambda pair: self._request_with_retry(*pair), pairs):
            yield [(index, reply)]

    def close(self) -> None:
        self.pool.close()
