"""The providers' batch wire formats: OpenAI files + batches, Anthropic message batches.

Each adapter turns one request into the provider's batch line (the same body a synchronous request
sends), submits lines as one batch, reports whether a batch has ended, and reads its results back as
(request key, Reply) pairs. The request key travels as the line's `custom_id`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from narrative_eval.backends.base import Conversation
from narrative_eval.records import GenerationParams, Reply

Retry = Callable[[Callable[[], Any]], Any]
"""Runs one provider call under the backend's retry policy."""

MB = 1024 * 1024


@dataclass(frozen=True)
class BatchStatus:
    """Where a submitted batch stands."""

    ended: bool
    """True once the provider will change nothing more (results, if any, can be read)."""
    status: str
    """The provider's own word (in_progress, completed, expired, ended, ...)."""
    detail: str = ""
    """Why a batch failed as a whole (e.g. input validation errors), when the provider says."""


def failed_reply(message: str) -> Reply:
    """An error reply for a batch line that has no result."""
    return Reply(text="", finish_reason="error", error=message)


class OpenAIBatches:
    """OpenAI's Batch API (also any openai_compatible server that implements /files and /batches)."""

    provider = "openai"
    max_requests = 50_000
    """Requests per batch the provider accepts."""
    max_bytes = 190 * MB
    """Input file size kept under the provider's 200 MB."""
    endpoint = "/v1/chat/completions"

    def __init__(self, backend: Any):
        self.backend = backend
        self.client = backend.client

    def line(self, key: str, conversation: Conversation, params: GenerationParams) -> dict[str, Any]:
        return {"custom_id": key, "method": "POST", "url": self.endpoint,
                "body": self.backend._request_kwargs(conversation, params)}

    def submit(self, lines: list[dict[str, Any]], retry: Retry) -> str:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
        upload = retry(lambda: self.client.files.create(file=("requests.jsonl", data, "application/jsonl"), purpose="batch"))
        batch = retry(lambda: self.client.batches.create(input_file_id=upload.id, endpoint=self.endpoint,
                                                         completion_window="24h"))
        return batch.id

    def status(self, batch_id: str) -> BatchStatus:
        batch = self.client.batches.retrieve(batch_id)
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        detail = "; ".join(f"line {e.line}: {e.message}" if e.line is not None else str(e.message) for e in errors)
        return BatchStatus(batch.status in ("completed", "failed", "expired", "cancelled"), batch.status, detail)

    def results(self, batch_id: str, retry: Retry) -> Iterator[tuple[str, Reply]]:
        from openai.types.chat import ChatCompletion

        batch = retry(lambda: self.client.batches.retrieve(batch_id))
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = retry(lambda file_id=file_id: self.client.files.content(file_id).text)
            for raw in text.splitlines():
                if not raw.strip():
                    continue
                line = json.loads(raw)
                response = line.get("response") or {}
                if response.get("status_code") == 200 and not line.get("error"):
                    yield line["custom_id"], self.backend._reply(ChatCompletion.model_validate(response["body"]), 0.0)
                    continue
                error = line.get("error") or (response.get("body") or {}).get("error") or {}
                status = f"HTTP {response['status_code']}: " if response.get("status_code") else ""
                yield line["custom_id"], failed_reply(f"batch {batch_id}: {status}{error.get('message') or error}")


class AnthropicBatches:
    """Anthropic's Message Batches API."""

    provider = "anthropic"
    max_requests = 100_000
    """Requests per batch the provider accepts."""
    max_bytes = 250 * MB
    """Request size kept under the provider's 256 MB."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.client = backend.client

    def line(self, key: str, conversation: Conversation, params: GenerationParams) -> dict[str, Any]:
        kwargs = self.backend._request_kwargs(conversation, params)
        # The synchronous path sends sampling settings as extra body fields; in a batch they are plain params.
        sampling = kwargs.pop("extra_body", {})
        return {"custom_id": key, "params": {**kwargs, **sampling}}

    def submit(self, lines: list[dict[str, Any]], retry: Retry) -> str:
        return retry(lambda: self.client.messages.batches.create(requests=lines)).id

    def status(self, batch_id: str) -> BatchStatus:
        batch = self.client.messages.batches.retrieve(batch_id)
        return BatchStatus(batch.processing_status == "ended", batch.processing_status)

    def results(self, batch_id: str, retry: Retry) -> Iterator[tuple[str, Reply]]:
        for item in retry(lambda: list(self.client.messages.batches.results(batch_id))):
            result = item.result
            if result.type == "succeeded":
                yield item.custom_id, self.backend._reply(result.message, 0.0)
                continue
            error = getattr(getattr(result, "error", None), "error", None)
            message = f"{error.type}: {error.message}" if error is not None else result.type
            yield item.custom_id, failed_reply(f"batch {batch_id}: {message}")
