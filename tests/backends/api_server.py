"""A local HTTP server that speaks the OpenAI and Anthropic wire formats with a real model.

The batch endpoints (OpenAI files + batches, Anthropic message batches) live in api_batches.py.

`/v1/chat/completions` (OpenAI) and `/v1/messages` (Anthropic) are answered with real
generations from a GGUF model through llama-cpp-python; a JSON schema (OpenAI
`response_format`) or a forced tool's `input_schema` (Anthropic) becomes grammar-constrained
output. Tests script faults (the next N requests answer 429 with Retry-After, 500, 401, a
spend-limit error), check the API key like the real services, and read back every request
received with its arrival time.

It binds 127.0.0.1 on a free port and serves from a background thread. Without a model it answers instantly
(a fixed fill, token counts from the words sent), so only the client's own cost is left:
`python tests/backends/api_server.py` serves that way in a process of its own (`start_instant_server`), for the
scale benchmark (bench/sweep_scale.py) and the resume test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from narrative_eval.backends.base import usable_cores
from narrative_eval.backends.llama_cpp import chat_completion, recording_llama


@dataclass
class Fault:
    """A scripted failure for the next `count` requests."""

    status: int
    """HTTP status to answer."""
    count: int = 1
    """How many of the next requests get it."""
    retry_after: str | None = None
    """Retry-After header value (seconds or an HTTP date), if any."""
    code: str | None = None
    """Provider error code/type (e.g. 'insufficient_quota'); a default fitting the status otherwise."""


@dataclass
class ReceivedRequest:
    """One request as the server saw it."""

    path: str
    """Request path."""
    headers: dict[str, str]
    """Headers, names lower-cased."""
    body: dict[str, Any]
    """Parsed JSON body."""
    arrived: float
    """time.monotonic() at arrival."""
    status: int = 200
    """Status answered."""
    method: str = "POST"
    """HTTP method."""


@dataclass
class ServerState:
    """What the handler threads share."""

    llm: Any
    """The llama_cpp.Llama model; None answers every request instantly with INSTANT_REPLY."""
    api_key: str | None
    """Key every request must carry, or None to accept any."""
    model_lock: threading.Lock = field(default_factory=threading.Lock)
    """llama.cpp contexts are not thread-safe: one generation at a time."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards faults and requests."""
    faults: list[Fault] = field(default_factory=list)
    """Scripted failures, consumed in order."""
    requests: list[ReceivedRequest] = field(default_factory=list)
    """Everything received, in order."""
    batches: Any = None
    """The batch endpoints' store (api_batches.BatchStore), made at start."""


OPENAI_ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}
ANTHROPIC_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


INSTANT_REPLY = "<ANSWER>The rest of the story went on as planned.</ANSWER>"
"""What the server answers without a model: a fill in the infilling prompts' answer tags."""


def _text_of(content: Any) -> str:
    """Message content as plain text (a string, or a list of text blocks/parts)."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass  # keep test output clean

    # ----------------------------------------------------------------- plumbing

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: dict[str, Any] | str, name: str | None = None) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        prefix = f"event: {name}\n" if name else ""
        self.wfile.write(f"{prefix}data: {text}\n\n".encode())
        self.wfile.flush()

    def _error(self, anthropic: bool, status: int, code: str | None, message: str, retry_after: str | None) -> None:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        if anthropic:
            payload = {"type": "error", "error": {"type": code or ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message}}
        else:
            payload = {"error": {"message": message, "type": "error", "code": code or OPENAI_ERROR_CODES.get(status, "error")}}
        self._send_json(status, payload, headers)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.do_POST()

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        multipart = (self.headers.get("Content-Type") or "").startswith("multipart/")
        body = {} if multipart else json.loads(raw or b"{}")
        anthropic = self.path.startswith("/v1/messages")
        received = ReceivedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic(), method=self.command)
        with state.lock:
            state.requests.append(received)
            fault = None
            if state.faults:
                fault = state.faults[0]
                fault.count -= 1
                if fault.count <= 0:
                    state.faults.pop(0)
        if fault is not None:
            received.status = fault.status
            message = "insufficient quota" if fault.code == "insufficient_quota" else f"scripted failure {fault.status}"
            self._error(anthropic, fault.status, fault.code, message, fault.retry_after)
            return
        # OpenAI clients send a bearer token; Anthropic clients send x-api-key (recent SDK
        # releases a bearer token as well).
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        presented = (self.headers.get("x-api-key") or bearer) if anthropic else bearer
        if state.api_key is not None and presented != state.api_key:
            received.status = 401
            self._error(anthropic, 401, None, "invalid x-api-key" if anthropic else "Incorrect API key provided", None)
            return
        from api_batches import route_batch

        if route_batch(self, raw):
            return
        if self.path.rstrip("/").endswith("/v1/messages"):
            self._anthropic(body)
        elif self.path.rstrip("/").endswith("/v1/chat/completions"):
            self._openai(body)
        else:
            received.status = 404
            self._error(anthropic, 404, "not_found", f"no route {self.path}", None)

    # ----------------------------------------------------------------- generation

    def _generate(self, messages: list[dict[str, str]], body: dict[str, Any], schema: dict | None, max_tokens: int, stop, seed,
                  top_logprobs: int = 0):
        """(text, finish reason, usage, the tokens with their log-probabilities when `top_logprobs` asks for them)."""
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": float(body.get("temperature", 1.0)),
            "top_p": float(body.get("top_p", 1.0)),
            "max_tokens": int(max_tokens),
            "stop": stop or None,
        }
        if seed is not None:
            kwargs["seed"] = int(seed)
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        if self.server.state.llm is None:
            words = sum(len(m["content"].split()) for m in messages)
            return INSTANT_REPLY, "stop", {"prompt_tokens": words, "completion_tokens": 9, "total_tokens": words + 9}, None
        with self.server.state.model_lock:
            out, logprobs = chat_completion(self.server.state.llm, top_logprobs, **kwargs)
        choice = out["choices"][0]
        return choice["message"].get("content") or "", choice.get("finish_reason") or "stop", out.get("usage") or {}, logprobs

    def _openai(self, body: dict[str, Any], send: bool = True) -> dict[str, Any] | None:
        messages = [{"role": m["role"], "content": _text_of(m.get("content"))} for m in body.get("messages", [])]
        schema = None
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            schema = response_format.get("json_schema", {}).get("schema", {"type": "object"})
        elif response_format.get("type") == "json_object":
            schema = {"type": "object"}
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 128
        stop = body.get("stop")
        stop = [stop] if isinstance(stop, str) else stop
        top_logprobs = int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0
        text, finish, usage, logprobs = self._generate(messages, body, schema, max_tokens, stop, body.get("seed"), top_logprobs)
        completion_id = "chatcmpl-" + uuid.uuid4().hex[:12]
        created = int(time.time())
        model = body.get("model", "local")
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
                         "logprobs": None if logprobs is None else {"content": [
                             {"token": step.token, "logprob": step.logprob, "bytes": list(step.token.encode()),
                              "top_logprobs": [{"token": token, "logprob": value, "bytes": list(token.encode())}
                                               for token, value in list(step.top.items())[:top_logprobs]]}
                             for step in logprobs]}}],
            "usage": {
                "prompt_tokens": usage.get("prompt_tokens", 0),
                "completion_tokens": usage.get("completion_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0),
            },
        }
        if not send:
            return payload  # a batch line: the caller writes it into the output file
        if body.get("stream"):
            self._start_events()
            base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
            self._event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
            for start in range(0, len(text), 8):
                self._event({**base, "choices": [{"index": 0, "delta": {"content": text[start : start + 8]}, "finish_reason": None}]})
            self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            self._event("[DONE]")
            return None
        self._send_json(200, payload)
        return None

    def _anthropic(self, body: dict[str, Any], send: bool = True) -> dict[str, Any] | None:
        system = body.get("system")
        messages = [{"role": "system", "content": _text_of(system)}] if system else []
        messages += [{"role": m["role"], "content": _text_of(m.get("content"))} for m in body.get("messages", [])]
        tool = None
        choice = body.get("tool_choice") or {}
        if choice.get("type") == "tool":
            tool = next(t for t in body.get("tools", []) if t.get("name") == choice.get("name"))
        schema = tool.get("input_schema", {"type": "object"}) if tool else None
        text, finish, usage, _ = self._generate(messages, body, schema, body.get("max_tokens", 128), body.get("stop_sequences"), None)
        stop_reason = "max_tokens" if finish == "length" else "end_turn"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if tool is not None:
            with contextlib.suppress(json.JSONDecodeError):
                content = [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": tool["name"], "input": json.loads(text)}]
                stop_reason = "tool_use"
        message = {
            "id": "msg_" + uuid.uuid4().hex[:12],
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "local"),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
        }
        if not send:
            return message  # a batch line: the caller writes it into the results
        if not body.get("stream"):
            self._send_json(200, message)
            return
        self._start_events()
        opening = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 0}}
        self._event({"type": "message_start", "message": opening}, "message_start")
        self._event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start")
        for start in range(0, len(text), 8):
            delta = {"type": "text_delta", "text": text[start : start + 8]}
            self._event({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        self._event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._event(
            {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": {"output_tokens": message["usage"]["output_tokens"]}},
            "message_delta",
        )
        self._event({"type": "message_stop"}, "message_stop")


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: ServerState):
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = state


class ApiServer:
    """Start with `start()`, stop with `stop()`; also a context manager."""

    def __init__(self, model_path: str | None, api_key: str | None = None, n_ctx: int = 2048):
        llm = None
        if model_path is not None:
            from llama_cpp import Llama

            with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
                threads = usable_cores()
                llm = recording_llama(Llama)(model_path=model_path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
        from api_batches import BatchStore

        self.state = ServerState(llm=llm, api_key=api_key, batches=BatchStore())
        """Shared with the handler threads."""
        self.httpd = ApiHTTPServer(self.state)
        """The listening server."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="api-server", daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.state.llm is not None:
            self.state.llm.close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- test controls

    def fail_next(self, status: int, count: int = 1, retry_after: str | None = None, code: str | None = None) -> None:
        """Answer the next `count` requests with `status` (after any faults already queued)."""
        with self.state.lock:
            self.state.faults.append(Fault(status, count, retry_after, code))

    def requests(self) -> list[ReceivedRequest]:
        with self.state.lock:
            return list(self.state.requests)

    def reset(self) -> None:
        """Forget received requests and pending faults."""
        with self.state.lock:
            self.state.requests.clear()
            self.state.faults.clear()
            self.state.batches.reset()

    @property
    def batches(self):
        """The batch endpoints' store: submissions counted, holds and line faults scripted (api_batches.py)."""
        return self.state.batches


def start_instant_server() -> tuple[subprocess.Popen, str]:
    """This server without a model, in its own process (and process group, so `tests.servers.stop` ends it): the
    process and its OpenAI base URL. Its own process keeps its work off the caller's interpreter lock."""
    process = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True, start_new_session=True)
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise RuntimeError(f"the instant API server did not start (exit {process.wait()})")
    return process, url


def main() -> None:
    """Serve instantly (no model) on a free port of 127.0.0.1; the first line written is the OpenAI base URL."""
    argparse.ArgumentParser(description=main.__doc__).parse_args()
    server = ApiServer(None).start()
    print(server.openai_base_url, flush=True)
    server._thread.join()


if __name__ == "__main__":
    main()
