"""Anthropic's Messages API through the official `anthropic` SDK.

The key comes from ANTHROPIC_API_KEY only; `options.base_url` may point at a proxy or a local
test server. System messages go to `system=`. A JSON schema is enforced by forced tool use:
the model must call one tool whose `input_schema` is the schema, and the tool input comes
back as the reply's JSON text. The Messages API takes no seed. Options: `base_url`,
`timeout`, `send_sampling` (default True; False leaves temperature/top_p to the API's
defaults, for models that refuse them), `max_concurrency`, `batch_size` and the retry settings (see retry.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

from narrative_eval.backends.base import Conversation, backend
from narrative_eval.backends.batch_providers import AnthropicBatches
from narrative_eval.backends.retry import RemoteBackend, call_with_retry
from narrative_eval.records import GenerationParams, ModelSpec, Reply

API_KEY_ENV = "ANTHROPIC_API_KEY"
# Name of the tool that carries a structured reply.
JSON_TOOL_NAME = "record_reply"
# Anthropic stop reasons in the platform's vocabulary.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


@backend("anthropic")
class AnthropicBackend(RemoteBackend):
    supports_seed = False
    supports_json_schema = True

    @classmethod
    def key_env(cls, spec: ModelSpec) -> str | None:
        return API_KEY_ENV

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        import anthropic

        key = os.environ.get(API_KEY_ENV)
        if not key:
            raise ValueError(f"model {spec.id!r}: set {API_KEY_ENV} to use the anthropic backend")
        base_url = spec.options.get("base_url")
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=str(base_url) if base_url else None,
            # retry.py is the only retry layer.
            max_retries=0,
            timeout=float(spec.options.get("timeout", 600.0)),
        )
        self.send_sampling = bool(spec.options.get("send_sampling", True))
        """False for models that refuse temperature/top_p (then the API's defaults apply)."""

    def identity(self) -> str:
        return f"{self.name}:{self.spec.weights}"

    def _request_kwargs(self, conversation: Conversation, params: GenerationParams) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in conversation if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": self.spec.weights,
            "max_tokens": params.max_new_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in conversation if m.role != "system"],
        }
        if system:
            kwargs["system"] = system
        if self.send_sampling:
            # Sampling settings travel in the JSON body: recent SDK releases no longer list
            # them as arguments, while the API still reads them for the models that take them.
            sampling: dict[str, Any] = {"temperature": params.temperature}
            # Recent Claude models refuse temperature and top_p together; send top_p only when it matters.
            if params.top_p < 1.0:
                sampling["top_p"] = params.top_p
            kwargs["extra_body"] = sampling
        if params.stop:
            kwargs["stop_sequences"] = list(params.stop)
        if params.json_schema is not None:
            kwargs["tools"] = [
                {
                    "name": JSON_TOOL_NAME,
                    "description": "Record the reply in the required structure.",
                    "input_schema": params.json_schema,
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": JSON_TOOL_NAME}
        return kwargs

    def _request(self, conversation: Conversation, params: GenerationParams) -> Reply:
        start = time.perf_counter()
        message = self.client.messages.create(**self._request_kwargs(conversation, params))
        return self._reply(message, time.perf_counter() - start)

    def _reply(self, message: Any, seconds: float) -> Reply:
        """A message as a Reply (shared by synchronous requests and batch results).

        Only a request with a JSON schema forces the tool, so a tool_use block means a structured reply."""
        inputs = [block.input for block in message.content if block.type == "tool_use"]
        if inputs:
            text = json.dumps(inputs[0], ensure_ascii=False)
        else:
            text = "".join(block.text for block in message.content if block.type == "text")
        return Reply(
            text=text,
            finish_reason=FINISH_REASONS.get(message.stop_reason or "end_turn", message.stop_reason or "stop"),
            prompt_tokens=message.usage.input_tokens or 0,
            completion_tokens=message.usage.output_tokens or 0,
            seconds=seconds,
        )

    def batch_api(self):
        """This backend's batch wire format (options `batch: true`)."""
        return AnthropicBatches(self)

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        if params.json_schema is not None:
            # A structured reply is only meaningful whole.
            yield self.generate([conversation], params)[0].text
            return
        kwargs = self._request_kwargs(conversation, params)
        events = call_with_retry(lambda: self.client.messages.create(stream=True, **kwargs), self.policy)
        for event in events:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield event.delta.text

    def close(self) -> None:
        super().close()
        self.client.close()
