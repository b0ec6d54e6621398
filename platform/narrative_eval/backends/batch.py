"""Hosted requests through the providers' batch APIs, behind the request cache.

When a hosted model's options say `batch: true`, CachedBackend hands the cache misses of one generate()
call to `run_batched`:

1. misses that a batch recorded as in flight already answers are not sent again: that batch is polled;
2. the rest are written as batch input under the provider's limits (several batches when they exceed
   them) and submitted; each batch id and its request keys go into the cache database the moment the
   provider returns the id, so a sweep killed while waiting picks the batch up on rerun;
3. batches are polled with growing intervals until they end; each successful line is cached under the key
   a synchronous request would have, so synchronous and batch runs share replies;
4. failed, expired and cancelled lines are requeued (`batch_requeue`: `sync`, `batch` or `none`) and counted.

Options: `batch`, `batch_poll_interval` (s, default 30), `batch_poll_max_interval` (600),
`batch_timeout` (s to wait for a batch before leaving it in flight for a rerun or `--collect`; 26 h),
`batch_requeue` (sync), `batch_rounds` (batch submissions per request when requeueing by batch; 3),
`batch_max_requests` and `batch_max_bytes` (the provider's limits by default).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from narrative_eval.backends.base import BACKENDS, Conversation
from narrative_eval.backends.batch_providers import BatchStatus, failed_reply
from narrative_eval.backends.retry import RetriesExhausted, call_with_retry
from narrative_eval.records import GenerationParams, ModelSpec, Reply

log = logging.getLogger(__name__)

REQUEUE_MODES = ("sync", "batch", "none")
STILL_IN_FLIGHT = "still in flight:"
"""Error-reply prefix of a request whose batch has not ended: never requeued (it would be paid twice)."""


@dataclass(frozen=True)
class BatchSettings:
    """Batch-mode options of one model."""

    poll_interval: float = 30.0
    """Seconds before the first poll; each later wait is 1.5 times longer."""
    poll_max_interval: float = 600.0
    """Cap on one wait between polls."""
    timeout: float = 26 * 3600.0
    """Seconds to wait for batches before leaving them in flight (the providers' window is 24 h)."""
    requeue: str = "sync"
    """What happens to failed, expired or cancelled lines: sent synchronously, in another batch, or not at all."""
    rounds: int = 3
    """Batches one request may go through when requeueing by batch."""
    max_requests: int | None = None
    """Requests per batch (None: the provider's limit)."""
    max_bytes: int | None = None
    """Bytes of batch input per batch (None: under the provider's limit)."""

    @classmethod
    def from_options(cls, spec: ModelSpec) -> BatchSettings:
        options = spec.options
        settings = cls(
            poll_interval=float(options.get("batch_poll_interval", cls.poll_interval)),
            poll_max_interval=float(options.get("batch_poll_max_interval", cls.poll_max_interval)),
            timeout=float(options.get("batch_timeout", cls.timeout)),
            requeue=str(options.get("batch_requeue", cls.requeue)),
            rounds=max(1, int(options.get("batch_rounds", cls.rounds))),
            max_requests=int(options["batch_max_requests"]) if options.get("batch_max_requests") else None,
            max_bytes=int(options["batch_max_bytes"]) if options.get("batch_max_bytes") else None,
        )
        if settings.requeue not in REQUEUE_MODES:
            raise ValueError(f"model {spec.id!r}: batch_requeue must be one of {REQUEUE_MODES}, got {settings.requeue!r}")
        return settings


def batchable(backend: str) -> bool:
    """True when the backend registered under this name has a batch wire format (an unknown name has none)."""
    return backend in BACKENDS and BACKENDS.get(backend).batchable()


def batch_enabled(spec: ModelSpec) -> bool:
    """True when the model's options ask for batch mode and its backend has a batch API."""
    return bool(spec.options.get("batch")) and batchable(spec.backend)


@dataclass
class BatchCounts:
    """What batch mode did for one model in this process."""

    submitted: int = 0
    """Batches submitted."""
    resumed: int = 0
    """Batches found in flight (from an earlier, stopped run) and polled instead of submitting again."""
    served: int = 0
    """Requests answered by a batch."""
    requeued: int = 0
    """Failed, expired or cancelled lines sent again."""
    unanswered: int = 0
    """Requests left without a reply (an error reply): failed after requeueing, or still in flight."""


Request = tuple[Conversation, GenerationParams]


class BatchRun:
    """The batch path of one backend behind one cache; `run` answers a set of keyed requests."""

    def __init__(self, backend: Any, cache: Any, on_submit: Callable[[str, int], None] | None = None):
        self.backend = backend
        self.cache = cache
        self.api = backend.batch_api()
        self.settings = BatchSettings.from_options(backend.spec)
        self.counts = BatchCounts()
        """Counters for this backend, over every call."""
        self.on_submit = on_submit
        """Called with (batch id, requests) right after a submission is recorded (the cell run's tag)."""
        self.sleep: Callable[[float], None] = time.sleep

    def figures(self) -> dict[str, float]:
        """The counters as cost-report figures (batches submitted and resumed, lines requeued, requests unanswered)."""
        counts = self.counts
        return {"batches_submitted": counts.submitted, "batches_resumed": counts.resumed,
                "batch_requeued": counts.requeued, "batch_unanswered": counts.unanswered}

    def _retry(self, call: Callable[[], Any]) -> Any:
        return call_with_retry(call, self.backend.policy)

    def run(self, requests: dict[str, Request]) -> tuple[dict[str, Reply], dict[str, Reply]]:
        """(replies read from batches, replies sent synchronously on requeue), together one per key.

        A request without a reply gets an error reply (never cached, so a rerun asks again)."""
        batched: dict[str, Reply] = {}
        synced: dict[str, Reply] = {}
        pending = dict(requests)
        for round_ in range(self.settings.rounds):
            if self.backend.fatal is not None:
                batched.update({k: failed_reply(f"{self.backend.fatal.message} (not sent)") for k in pending if k not in batched})
                break
            found, failures = self._one_round(pending)
            batched.update(found)
            batched.update(failures)
            requeue = {key: pending[key] for key, reply in failures.items() if not reply.error.startswith(STILL_IN_FLIGHT)}
            if not requeue or self.settings.requeue == "none" or self.backend.fatal is not None:
                break
            if self.settings.requeue == "batch" and round_ + 1 == self.settings.rounds:
                break
            log.warning("model %s: requeueing %d failed batch line(s) %s", self.backend.spec.id, len(requeue),
                        "synchronously" if self.settings.requeue == "sync" else "in a new batch")
            self.counts.requeued += len(requeue)
            if self.settings.requeue == "sync":
                keys = list(requeue)
                replies = self.backend.generate([requeue[k][0] for k in keys], [requeue[k][1] for k in keys])
                synced = dict(zip(keys, replies, strict=True))
                for key in keys:
                    del batched[key]
                break
            pending = requeue
        self.counts.unanswered += sum(not reply.ok for reply in [*batched.values(), *synced.values()])
        return batched, synced

    def _one_round(self, pending: dict[str, Request]) -> tuple[dict[str, Reply], dict[str, Reply]]:
        """Submit what no batch in flight answers, wait for every batch concerned; (successes, failures)."""
        in_flight = self.cache.in_flight(list(pending))
        self.counts.resumed += len(in_flight)
        covered = {key for keys in in_flight.values() for key in keys}
        failures: dict[str, Reply] = {}
        batch_ids = list(in_flight)
        for chunk in self._chunks([key for key in pending if key not in covered], pending):
            keys = [key for key, _ in chunk]
            try:
                batch_id = self.api.submit([line for _, line in chunk], self._retry)
            except RetriesExhausted as error:
                failures.update(self._submit_failed(error, keys))
                if error.failure.fatal:
                    break
                continue
            self.cache.record_batch(batch_id, self.api.provider, self.backend.spec.model_dump_json(), keys)
            self.counts.submitted += 1
            log.info("model %s: submitted batch %s (%d requests)", self.backend.spec.id, batch_id, len(keys))
            if self.on_submit is not None:
                self.on_submit(batch_id, len(keys))
            batch_ids.append(batch_id)
        found, errors = self._wait(batch_ids)
        found = {key: reply for key, reply in found.items() if key in pending}
        self.counts.served += len(found)
        fatal = self.backend.fatal
        unsent = failed_reply(f"{fatal.message} (not sent)") if fatal is not None else None
        for key in pending:
            if key not in found and key not in failures:
                failures[key] = errors.get(key) or unsent or failed_reply("batch line without a result")
        return found, failures

    def _submit_failed(self, error: RetriesExhausted, keys: list[str]) -> dict[str, Reply]:
        if error.failure.fatal:
            self.backend.fatal = error.failure  # every later request would fail the same way: send nothing more
        message = f"batch submission failed: {error.failure.message} [after {error.attempts} attempt(s)]"
        log.error("model %s: %s", self.backend.spec.id, message)
        return {key: failed_reply(message) for key in keys}

    def _chunks(self, keys: list[str], pending: dict[str, Request]) -> list[list[tuple[str, dict]]]:
        """Batch lines split under the provider's request and size limits."""
        limit_n = self.settings.max_requests or self.api.max_requests
        limit_bytes = self.settings.max_bytes or self.api.max_bytes
        chunks: list[list[tuple[str, dict]]] = []
        size = 0
        for key in keys:
            line = self.api.line(key, *pending[key])
            line_bytes = len(json.dumps(line, ensure_ascii=False).encode()) + 1
            if not chunks or len(chunks[-1]) >= limit_n or size + line_bytes > limit_bytes:
                chunks.append([])
                size = 0
            chunks[-1].append((key, line))
            size += line_bytes
        return chunks

    def _wait(self, batch_ids: Sequence[str]) -> tuple[dict[str, Reply], dict[str, Reply]]:
        """Poll until every batch ends (or the timeout); (successes, failures) over all their lines."""
        found: dict[str, Reply] = {}
        errors: dict[str, Reply] = {}
        waiting = list(batch_ids)
        deadline = time.monotonic() + self.settings.timeout
        interval = self.settings.poll_interval
        while waiting:
            for batch_id in list(waiting):
                try:
                    status: BatchStatus = self._retry(lambda batch_id=batch_id: self.api.status(batch_id))
                except RetriesExhausted as error:
                    if error.failure.fatal:
                        self.backend.fatal = error.failure
                    # Left in flight: a rerun polls it again rather than paying for its lines twice.
                    errors.update(self._all_lines(batch_id, f"{STILL_IN_FLIGHT} batch {batch_id} "
                                                            f"(polling failed: {error.failure.message})"))
                    waiting.remove(batch_id)
                    continue
                if status.ended:
                    ok, failed = self.collect(batch_id, status)
                    found.update(ok)
                    errors.update(failed)
                    waiting.remove(batch_id)
            if not waiting:
                break
            if time.monotonic() + interval > deadline:
                for batch_id in waiting:
                    log.warning("model %s: batch %s not finished after %.0f s; it stays recorded, rerun (or "
                                "--collect) to read it", self.backend.spec.id, batch_id, self.settings.timeout)
                    errors.update(self._all_lines(batch_id, f"{STILL_IN_FLIGHT} batch {batch_id}"))
                break
            self.sleep(interval)
            interval = min(interval * 1.5, self.settings.poll_max_interval)
        return found, errors

    def _all_lines(self, batch_id: str, message: str) -> dict[str, Reply]:
        return {key: failed_reply(message) for key in self.cache.batch_keys(batch_id)}

    def collect(self, batch_id: str, status: BatchStatus) -> tuple[dict[str, Reply], dict[str, Reply]]:
        """Read an ended batch into the cache and close it; (successes, failures) over its lines.

        A failed line stays a cache miss, so whoever asks for it next sends it again."""
        replies = {} if status.status == "failed" else dict(self._retry(lambda: list(self.api.results(batch_id, self._retry))))
        ok = {key: reply for key, reply in replies.items() if reply.ok}
        self.cache.put_many(list(ok.items()))
        self.cache.close_batch(batch_id, "collected")
        detail = f" ({status.detail})" if status.detail else ""
        keys = self.cache.batch_keys(batch_id)
        failed = {key: replies.get(key) or failed_reply(f"batch {batch_id} {status.status}{detail}: no result for this line")
                  for key in keys if key not in ok}
        if failed:
            log.warning("model %s: batch %s %s%s: %d of %d lines answered", self.backend.spec.id, batch_id,
                        status.status, detail, len(ok), len(keys))
        return ok, failed


def collect_open(cache: Any, specs: Sequence[ModelSpec], make_backend: Callable[[ModelSpec], Any]) -> list[str]:
    """Poll once every batch in flight for the models named in `specs`; read the ended ones into the cache.

    Starts nothing: lines that failed stay cache misses for the next run. One line of news per batch."""
    ids = {spec.id for spec in specs}
    news = []
    for batch_id, provider, spec_json in cache.open_batches():
        spec = ModelSpec.model_validate_json(spec_json)
        if spec.id not in ids:
            continue
        run = BatchRun(make_backend(spec), cache)
        where = f"batch {batch_id} ({spec.id}, {provider}, {len(cache.batch_keys(batch_id))} requests)"
        try:
            status: BatchStatus = run._retry(lambda batch_id=batch_id: run.api.status(batch_id))
        except RetriesExhausted as error:
            news.append(f"{where}: could not be polled: {error.failure.message}")
            continue
        if not status.ended:
            news.append(f"{where}: {status.status}, not finished")
            continue
        ok, failed = run.collect(batch_id, status)
        news.append(f"{where}: {status.status}; {len(ok)} replies cached, {len(failed)} without a reply "
                    "(the next run sends them again)")
    return news
