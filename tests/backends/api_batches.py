"""The batch endpoints of the local API server: OpenAI files + batches, Anthropic message batches.

A batch stays `in_progress` for `polls_before_done` status requests (forever while `hold` is set), then
every line is answered by the same code that answers a synchronous request, so a batch reply equals the
synchronous one. Tests script line failures (`fail_lines`: a 500 error line, or an expired line) and
whole-batch outcomes (`expire_next`), and read `submissions` (batches created).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any


@dataclass
class StoredBatch:
    """One submitted batch as the server keeps it."""

    id: str
    """Batch id."""
    provider: str
    """'openai' or 'anthropic'."""
    lines: list[dict[str, Any]]
    """The submitted request lines."""
    created: float
    """time.time() at creation."""
    input_file_id: str = ""
    """OpenAI: the uploaded input file."""
    polls: int = 0
    """Status requests answered so far."""
    results: list[dict[str, Any]] | None = None
    """Result lines once processed (OpenAI: output and error lines together)."""
    expired: bool = False
    """Ended as expired: every line without a result."""


@dataclass
class BatchStore:
    """What the batch endpoints keep, and the tests' controls."""

    polls_before_done: int = 1
    """Status requests a batch answers as in progress before it is processed."""
    hold: bool = False
    """Keep every batch in progress (a test that kills a sweep mid-batch releases it later)."""
    line_faults: list[str | None] = field(default_factory=list)
    """Outcomes of the next processed lines, consumed in order: 'error' (HTTP 500 line), 'expired' or None (answered)."""
    expire_next: bool = False
    """The next batch processed expires as a whole."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Uploaded files and written output files by id."""
    batches: dict[str, StoredBatch] = field(default_factory=dict)
    """Every batch by id."""
    submissions: int = 0
    """Batches created."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """One batch processed at a time."""

    def reset(self) -> None:
        self.polls_before_done, self.hold, self.expire_next, self.submissions = 1, False, False, 0
        self.line_faults.clear()
        self.files.clear()
        self.batches.clear()


def _now_iso(offset_hours: float = 0.0) -> str:
    return (datetime.now(timezone.utc) + timedelta(hours=offset_hours)).isoformat()


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a multipart body: name -> (filename, bytes)."""
    message = BytesParser(policy=default_policy).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


def _process(handler: Any, batch: StoredBatch) -> None:
    """Answer every line (or script its failure)."""
    store = handler.server.state.batches
    results: list[dict[str, Any]] = []
    expire_all, store.expire_next = store.expire_next, False
    for line in batch.lines:
        fault = "expired" if expire_all else (store.line_faults.pop(0) if store.line_faults else None)
        results.append(_result(handler, batch.provider, line, fault))
    batch.results, batch.expired = results, expire_all


def _result(handler: Any, provider: str, line: dict[str, Any], fault: str | None) -> dict[str, Any]:
    custom_id = line["custom_id"]
    if provider == "anthropic":
        if fault == "expired":
            return {"custom_id": custom_id, "result": {"type": "expired"}}
        if fault == "error":
            error = {"type": "error", "error": {"type": "api_error", "message": "scripted line failure"}}
            return {"custom_id": custom_id, "result": {"type": "errored", "error": error}}
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": handler._anthropic(line["params"], send=False)}}
    request_id = "req_" + uuid.uuid4().hex[:12]
    if fault == "expired":
        error = {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
        return {"id": "batch_req_" + uuid.uuid4().hex[:12], "custom_id": custom_id, "response": None, "error": error}
    if fault == "error":
        body = {"error": {"message": "scripted line failure", "type": "server_error", "code": "server_error"}}
        response = {"status_code": 500, "request_id": request_id, "body": body}
    else:
        response = {"status_code": 200, "request_id": request_id, "body": handler._openai(line["body"], send=False)}
    return {"id": "batch_req_" + uuid.uuid4().hex[:12], "custom_id": custom_id, "response": response, "error": None}


def _advance(handler: Any, batch: StoredBatch) -> None:
    store = handler.server.state.batches
    batch.polls += 1
    if batch.results is None and not store.hold and batch.polls > store.polls_before_done:
        with store.lock:
            if batch.results is None:
                _process(handler, batch)


def _openai_batch(handler: Any, batch: StoredBatch) -> dict[str, Any]:
    store = handler.server.state.batches
    payload: dict[str, Any] = {
        "id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "input_file_id": batch.input_file_id,
        "completion_window": "24h", "created_at": int(batch.created), "status": "in_progress",
        "request_counts": {"total": len(batch.lines), "completed": 0, "failed": 0},
    }
    if batch.results is None:
        return payload
    good = [r for r in batch.results if (r.get("response") or {}).get("status_code") == 200]
    bad = [r for r in batch.results if r not in good]
    for kind, rows in (("output_file_id", good), ("error_file_id", bad)):
        if rows:
            file_id = f"file-{kind[:3]}-{batch.id}"
            store.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            payload[kind] = file_id
    payload["status"] = "expired" if batch.expired else "completed"
    payload["request_counts"] = {"total": len(batch.lines), "completed": len(good), "failed": len(bad)}
    return payload


def _anthropic_batch(handler: Any, batch: StoredBatch) -> dict[str, Any]:
    counts = {"processing": len(batch.lines), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    payload: dict[str, Any] = {
        "id": batch.id, "type": "message_batch", "processing_status": "in_progress", "request_counts": counts,
        "created_at": _now_iso(), "expires_at": _now_iso(24), "ended_at": None, "results_url": None,
    }
    if batch.results is not None:
        counts["processing"] = 0
        for result in batch.results:
            counts[{"succeeded": "succeeded", "errored": "errored", "expired": "expired"}[result["result"]["type"]]] += 1
        host, port = handler.server.server_address[:2]
        payload.update(processing_status="ended", ended_at=_now_iso(),
                       results_url=f"http://{host}:{port}/v1/messages/batches/{batch.id}/results")
    return payload


def _send_bytes(handler: Any, data: bytes, content_type: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def route_batch(handler: Any, raw: bytes) -> bool:
    """Answer a batch endpoint request; False when the path is not one."""
    store: BatchStore = handler.server.state.batches
    path, method = handler.path.split("?")[0].rstrip("/"), handler.command
    if path == "/v1/files" and method == "POST":
        fields = _multipart(handler.headers.get("Content-Type"), raw)
        filename, data = fields["file"]
        file_id = "file-" + uuid.uuid4().hex[:12]
        store.files[file_id] = data
        handler._send_json(200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                 "filename": filename or "upload.jsonl", "purpose": fields["purpose"][1].decode(),
                                 "status": "processed"})
        return True
    if (match := re.fullmatch(r"/v1/files/([\w-]+)/content", path)) and method == "GET":
        _send_bytes(handler, store.files[match.group(1)], "application/octet-stream")
        return True
    if path in ("/v1/batches", "/v1/messages/batches") and method == "POST":
        body = json.loads(raw)
        if path == "/v1/batches":
            lines = [json.loads(text) for text in store.files[body["input_file_id"]].decode().splitlines() if text.strip()]
            batch = StoredBatch("batch_" + uuid.uuid4().hex[:12], "openai", lines, time.time(), body["input_file_id"])
        else:
            batch = StoredBatch("msgbatch_" + uuid.uuid4().hex[:12], "anthropic", body["requests"], time.time())
        store.batches[batch.id] = batch
        store.submissions += 1
        handler._send_json(200, (_openai_batch if batch.provider == "openai" else _anthropic_batch)(handler, batch))
        return True
    if (match := re.fullmatch(r"/v1/(messages/)?batches/([\w-]+)(/results)?", path)) and method == "GET":
        batch = store.batches[match.group(2)]
        if match.group(3):
            _send_bytes(handler, "".join(json.dumps(r) + "\n" for r in batch.results or []).encode(), "application/binary")
            return True
        _advance(handler, batch)
        handler._send_json(200, (_openai_batch if batch.provider == "openai" else _anthropic_batch)(handler, batch))
        return True
    return False
