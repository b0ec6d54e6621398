"""Any server that speaks `/v1/chat/completions`, through the official `openai` SDK.

Covers vLLM's server, llama.cpp's server (and llama-cpp-python's), LM Studio, Ollama and
Gemini's OpenAI-compatible endpoint. Options:

- `base_url`: the server's API root, e.g. 'http://127.0.0.1:8000/v1' (required here).
- `api_key_env`: name of the environment variable that holds the key; local servers that
  need none may leave it out. The key itself never appears in options, logs, the cache key
  or the model identity.
- `revision`: a label for the exact weights behind the server (e.g. a GGUF digest), which
  goes into the cache identity, because a local server's model name rarely pins the weights.
- `json_mode`: how `GenerationParams.json_schema` is sent: 'json_schema' (strict
  structured output, the default; OpenAI, vLLM, llama.cpp's llama-server, LM Studio),
  'json_object_schema' (`{"type": "json_object", "schema": ...}`, the llama.cpp servers'
  form, and the only one llama-cpp-python's server accepts), 'json_object' (plain JSON mode,
  for servers without schema support) or 'none'.
- `timeout`, `max_concurrency`, `batch_size`, `max_attempts`, `retry_*`: see retry.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from narrative_eval.backends.base import Conversation, backend
from narrative_eval.backends.batch_providers import OpenAIBatches
from narrative_eval.backends.retry import RemoteBackend, call_with_retry
from narrative_eval.records import GenerationParams, ModelSpec, Reply, TokenLogprob

JSON_MODES = ("json_schema", "json_object_schema", "json_object", "none")
# A key the SDK accepts for servers that check none (the SDK refuses an empty key).
NO_KEY = "no-key-needed"


def token_logprobs(choice: Any) -> list[TokenLogprob] | None:
    """A chat completion choice's `logprobs.content` as TokenLogprobs (None when the request asked for none)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if content is None:
        return None
    return [TokenLogprob(token=entry.token, logprob=entry.logprob,
                         top={**{alt.token: alt.logprob for alt in sorted(entry.top_logprobs or [], key=lambda a: a.logprob)},
                              entry.token: entry.logprob})
            for entry in content]


@backend("openai_compatible")
class OpenAICompatibleBackend(RemoteBackend):
    supports_json_schema = True
    score_logprobs = True  # `logprobs` and `top_logprobs` of the chat completions API (vLLM's and llama.cpp's servers)
    max_tokens_field = "max_tokens"
    """Request field for the token budget; most compatible servers only know 'max_tokens'."""

    @classmethod
    def key_env(cls, spec: ModelSpec) -> str | None:
        """`options.api_key_env` (a local server may need no key)."""
        name = spec.options.get("api_key_env")
        return str(name) if name else None

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        import openai

        options = spec.options
        self.json_mode = str(options.get("json_mode", "json_schema"))
        if self.json_mode not in JSON_MODES:
            raise ValueError(f"model {spec.id!r}: json_mode must be one of {JSON_MODES}, got {self.json_mode!r}")
        self.client = openai.OpenAI(
            base_url=self._base_url(),
            api_key=self._api_key(),
            # retry.py is the only retry layer: the SDK's own retries would multiply attempts.
            max_retries=0,
            timeout=float(options.get("timeout", 600.0)),
        )

    # ----------------------------------------------------------------- configuration

    def _base_url(self) -> str | None:
        base_url = self.spec.options.get("base_url")
        if not base_url:
            raise ValueError(f"model {self.spec.id!r}: the openai_compatible backend needs options.base_url")
        return str(base_url)

    def _api_key(self) -> str:
        env_name = self.key_env(self.spec)
        if not env_name:
            return NO_KEY
        key = os.environ.get(env_name)
        if not key:
            raise ValueError(f"model {self.spec.id!r}: environment variable {env_name} (api_key_env) is not set")
        return key

    def identity(self) -> str:
        revision = self.spec.options.get("revision")
        return f"{self.name}:{self.spec.weights}" + (f"@{revision}" if revision else "")

    # ----------------------------------------------------------------- requests

    def _request_kwargs(self, conversation: Conversation, params: GenerationParams) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.spec.weights,
            "messages": [{"role": m.role, "content": m.content} for m in conversation],
            "temperature": params.temperature,
            "top_p": params.top_p,
            self.max_tokens_field: params.max_new_tokens,
        }
        if params.seed is not None:
            kwargs["seed"] = params.seed
        if params.stop:
            kwargs["stop"] = list(params.stop)
        if params.json_schema is not None and self.json_mode != "none":
            kwargs["response_format"] = self._response_format(params.json_schema)
        if params.top_logprobs:
            kwargs.update(logprobs=True, top_logprobs=params.top_logprobs)
        return kwargs

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self.json_mode == "json_object":
            return {"type": "json_object"}
        if self.json_mode == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": str(schema.get("title") or "reply").replace(" ", "_")[:64],
                "schema": schema,
                "strict": bool(self.spec.options.get("strict", True)),
            },
        }

    def _request(self, conversation: Conversation, params: GenerationParams) -> Reply:
        start = time.perf_counter()
        response = self.client.chat.completions.create(**self._request_kwargs(conversation, params))
        return self._reply(response, time.perf_counter() - start)

    def _reply(self, response: Any, seconds: float) -> Reply:
        """A chat completion as a Reply (shared by synchronous requests and batch results)."""
        choice = response.choices[0]
        usage = response.usage
        return Reply(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            seconds=seconds,
            logprobs=token_logprobs(choice),
        )

    def batch_api(self):
        """This backend's batch wire format (options `batch: true`)."""
        return OpenAIBatches(self)

    def stream(self, conversation: Conversation, params: GenerationParams) -> Iterator[str]:
        kwargs = self._request_kwargs(conversation, params)
        # Rate limits and server errors arrive before the first chunk, so opening the stream
        # is retried like any request; a stream broken half-way is not replayed.
        chunks = call_with_retry(lambda: self.client.chat.completions.create(stream=True, **kwargs), self.policy)
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content

    def close(self) -> None:
        super().close()
        self.client.close()
