"""Watching a vLLM engine process for death while an `LLM` call waits on it (vllm_backend.py)."""

from __future__ import annotations

import threading


class EngineWatch:
    """Unblocks an `LLM` call whose engine process dies while the call waits for outputs.

    vLLM's client notices the death (its monitor marks the engine dead) but a call already
    waiting on the output queue is never woken, so it would hang forever; this puts an error
    on that queue, which the client turns into EngineDeadError.
    """

    def __init__(self, llm, interval: float = 0.5):
        client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        self.resources = getattr(client, "resources", None)
        self.queue = getattr(client, "outputs_queue", None)
        self.interval = interval
        self.stop = threading.Event()

    def __enter__(self) -> EngineWatch:
        if self.resources is not None and self.queue is not None:
            if self.resources.engine_dead:
                self.queue.put_nowait(RuntimeError("engine core is dead"))
            else:
                threading.Thread(target=self._watch, daemon=True, name="vllm-engine-watch").start()
        return self

    def _watch(self) -> None:
        while not self.stop.wait(self.interval):
            if self.resources.engine_dead:
                self.queue.put_nowait(RuntimeError("engine core died"))
                return

    def __exit__(self, *exc) -> None:
        self.stop.set()
