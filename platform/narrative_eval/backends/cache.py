"""SQLite request cache shared by generators and judges.

A request's key covers everything that can change its reply: the model's exact identity
(weights digest, revision or API model), backend, quantization, chat format, the messages and
the generation parameters including the seed. Only successful replies are stored, so a
rerun retries failures and never pays twice for a success. Writes commit per batch, so a
process killed with SIGKILL loses at most the batch in flight.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from narrative_eval.backends.accounting import Prices, Usage
from narrative_eval.backends.base import Backend, Conversation, params_per_request
from narrative_eval.backends.batch import BatchRun, batch_enabled
from narrative_eval.records import GenerationParams, Reply, stable_hash

DEFAULT_CACHE_PATH = Path(".cache") / "requests.sqlite"

log = logging.getLogger(__name__)


def default_cache_path() -> Path:
    return Path(os.environ.get("NARRATIVE_EVAL_CACHE", DEFAULT_CACHE_PATH))


class RequestCache:
    """Reply store keyed by request digest."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError as error:
            self._conn = self._replace_corrupt(error)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL, created REAL NOT NULL)"
            )
            # Provider batches in flight: recorded at submission so a rerun polls them instead of paying twice.
            conn.execute(
                "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, provider TEXT NOT NULL, "
                "spec TEXT NOT NULL, state TEXT NOT NULL, created REAL NOT NULL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS batch_requests (key TEXT NOT NULL, batch_id TEXT NOT NULL, "
                "PRIMARY KEY (key, batch_id))"
            )
            conn.commit()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _replace_corrupt(self, error: sqlite3.DatabaseError) -> sqlite3.Connection:
        """Move a damaged cache file aside (kept for inspection) and start an empty one: the sweep goes on, regenerating."""
        if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
            raise error  # busy, not broken
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{aside}{suffix}")
        log.warning("request cache %s is damaged (%s); moved it to %s and started an empty cache", self.path, error, aside)
        return self._open()

    def _retry_on_corruption(self, operation):
        """Run operation(conn) under the lock; a cache found damaged mid-run is replaced once and the operation retried."""
        with self._lock:
            try:
                return operation(self._conn)
            except sqlite3.DatabaseError as error:
                if isinstance(error, sqlite3.OperationalError):
                    raise
                self._conn.close()
                self._conn = self._replace_corrupt(error)
                return operation(self._conn)

    def get_many(self, keys: Sequence[str]) -> dict[str, Reply]:
        def read(conn: sqlite3.Connection) -> dict[str, Reply]:
            found: dict[str, Reply] = {}
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for key, payload in conn.execute(f"SELECT key, reply FROM replies WHERE key IN ({marks})", chunk):
                    found[key] = Reply.model_validate_json(payload)
            return found

        return self._retry_on_corruption(read)

    def put_many(self, items: Sequence[tuple[str, Reply]]) -> None:
        now = time.time()
        rows = [(key, reply.model_dump_json(exclude={"cached"}), now) for key, reply in items]

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR REPLACE INTO replies (key, reply, created) VALUES (?, ?, ?)", rows)
            conn.commit()

        self._retry_on_corruption(write)

    def record_batch(self, batch_id: str, provider: str, spec_json: str, keys: Sequence[str]) -> None:
        """Remember a submitted batch and the request keys it answers (state 'in_flight')."""

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, 'in_flight', ?)",
                         (batch_id, provider, spec_json, time.time()))
            conn.executemany("INSERT OR IGNORE INTO batch_requests VALUES (?, ?)", [(k, batch_id) for k in keys])
            conn.commit()

        self._retry_on_corruption(write)

    def in_flight(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """Batch id -> those of `keys` it answers, for every batch still in flight."""

        def read(conn: sqlite3.Connection) -> dict[str, list[str]]:
            found: dict[str, list[str]] = {}
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "SELECT r.batch_id, r.key FROM batch_requests r JOIN batches b ON b.batch_id = r.batch_id "
                    f"WHERE b.state = 'in_flight' AND r.key IN ({marks})", chunk)
                for batch_id, key in rows:
                    found.setdefault(batch_id, []).append(key)
            return found

        return self._retry_on_corruption(read)

    def open_batches(self) -> list[tuple[str, str, str]]:
        """(batch id, provider, model spec JSON) of every batch still in flight, oldest first."""
        return self._retry_on_corruption(lambda conn: conn.execute(
            "SELECT batch_id, provider, spec FROM batches WHERE state = 'in_flight' ORDER BY created").fetchall())

    def batch_keys(self, batch_id: str) -> list[str]:
        """The request keys a recorded batch answers."""
        return [k for (k,) in self._retry_on_corruption(lambda conn: conn.execute(
            "SELECT key FROM batch_requests WHERE batch_id = ?", (batch_id,)).fetchall())]

    def close_batch(self, batch_id: str, state: str) -> None:
        """Mark a batch read back ('collected'), or otherwise finished with, so no rerun polls it again."""

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE batches SET state = ? WHERE batch_id = ?", (state, batch_id))
            conn.commit()

        self._retry_on_corruption(write)

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def request_key(backend: Backend, conversation: Conversation, params: GenerationParams) -> str:
    spec = backend.spec
    return stable_hash(
        {
            "identity": backend.identity(),
            "backend": spec.backend,
            "quantization": spec.quantization,
            "chat_format": spec.chat_format,
            "messages": [m.model_dump() for m in conversation],
            "params": params.model_dump(mode="json"),
        },
        length=32,
    )


class CachedBackend:
    """A backend seen through the request cache. Counts what it really generated."""

    def __init__(self, backend: Backend, cache: RequestCache | None):
        self.backend = backend
        self.cache = cache
        self.generated = 0
        """Requests actually sent to the engine by this wrapper."""
        self.hits = 0
        """Requests served from the cache."""
        self.usage = Usage(Prices.of(backend.spec))
        """Tokens of every reply this wrapper returned, by source (cache, synchronous, batch)."""
        self.batch = BatchRun(backend, cache) if cache is not None and batch_enabled(backend.spec) else None
        """The batch path, when the model's options say `batch: true` (it records batches in the cache)."""

    @property
    def spec(self):
        return self.backend.spec

    @property
    def sequential(self) -> bool:
        return self.backend.sequential

    @property
    def repeats_greedy(self) -> bool:
        return self.backend.repeats_greedy

    @property
    def batch_size(self) -> int:
        # In batch mode a study's chunk becomes provider batches: hand over as many requests as one may hold.
        if self.batch is not None:
            return self.batch.settings.max_requests or self.batch.api.max_requests
        return self.backend.batch_size

    def run_params(self) -> dict[str, str]:
        return self.backend.run_params()

    def generate(
        self, conversations: Sequence[Conversation], params: GenerationParams | Sequence[GenerationParams]
    ) -> list[Reply]:
        """Replies for a batch; `params` is shared or one per conversation (e.g. per-instance seeds)."""
        per_request = params_per_request(conversations, params)
        keys = [request_key(self.backend, c, p) for c, p in zip(conversations, per_request)]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        replies = {i: found[k].model_copy(update={"cached": True}) for i, k in enumerate(keys) if k in found}
        missing = [i for i in range(len(conversations)) if i not in replies]
        for i in replies:
            self.usage.add("cache", replies[i].prompt_tokens, replies[i].completion_tokens)
        if missing and self.batch is not None:
            self._generate_batched(missing, keys, conversations, per_request, replies)
        for group in self._groups(missing if self.batch is None else [], per_request):
            for done in self._call([conversations[i] for i in group], [per_request[i] for i in group]):
                fresh = [(group[j], reply) for j, reply in done]
                self.generated += len(fresh)
                self._store([(keys[i], reply) for i, reply in fresh], "sync")
                replies.update(fresh)
        self.hits += len(conversations) - len(missing)
        return [replies[i] for i in range(len(conversations))]

    def _store(self, fresh: list[tuple[str, Reply]], source: str) -> None:
        """Count fresh replies' tokens and cache the successful ones (a batch's are cached as it is read)."""
        for _, reply in fresh:
            if reply.ok:
                self.usage.add(source, reply.prompt_tokens, reply.completion_tokens)
        if self.cache is not None and source == "sync":
            self.cache.put_many([(key, reply) for key, reply in fresh if reply.ok])

    def _generate_batched(self, missing: list[int], keys: list[str], conversations: Sequence[Conversation],
                          per_request: list[GenerationParams], replies: dict[int, Reply]) -> None:
        """The misses as provider batches (one request per distinct key); requeued lines may come back synchronously."""
        requests = {keys[i]: (conversations[i], per_request[i]) for i in missing}
        batched, synced = self.batch.run(requests)
        self.generated += len(requests)
        self._store(list(batched.items()), "batch")
        self._store(list(synced.items()), "sync")
        answers = {**batched, **synced}
        replies.update({i: answers[keys[i]] for i in missing})

    def _groups(self, indices: list[int], per_request: list[GenerationParams]) -> list[list[int]]:
        if self.backend.per_request_params:
            return [indices] if indices else []
        groups: dict[str, list[int]] = {}
        for i in indices:
            groups.setdefault(per_request[i].digest(), []).append(i)
        return list(groups.values())

    def _call(self, conversations: list[Conversation], params: list[GenerationParams]) -> Iterator[list[tuple[int, Reply]]]:
        if self.backend.per_request_params:
            return self.backend.replies_as_done(conversations, params)
        return self.backend.replies_as_done(conversations, params[0])

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        """The reply in pieces: whole from the cache when it is there, else streamed and then cached.

        A streamed reply carries no token counts, so it is cached only by the live path that asked for it
        (its key has that request's own seed); a sweep's request with the same key would reuse its text.
        """
        key = request_key(self.backend, conversation, params)
        found = self.cache.get_many([key]) if self.cache is not None else {}
        if key in found:
            self.hits += 1
            yield found[key].text
            return
        start, pieces = time.perf_counter(), []
        for piece in self.backend.stream(conversation, params):
            pieces.append(piece)
            yield piece
        self.generated += 1
        if self.cache is not None:
            self.cache.put_many([(key, Reply(text="".join(pieces), seconds=time.perf_counter() - start))])
