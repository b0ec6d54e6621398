"""The official OpenAI API: the OpenAI-compatible path with OpenAI's own endpoint and key.

The key comes from OPENAI_API_KEY only. `options.base_url` may point elsewhere (a proxy or
a local test server); by default the SDK's own endpoint is used.
"""

from __future__ import annotations

import os

from narrative_eval.backends.base import backend
from narrative_eval.backends.openai_compatible import OpenAICompatibleBackend
from narrative_eval.records import ModelSpec

API_KEY_ENV = "OPENAI_API_KEY"


@backend("openai")
class OpenAIBackend(OpenAICompatibleBackend):
    # OpenAI deprecated 'max_tokens' for chat completions (reasoning models refuse it).
    max_tokens_field = "max_completion_tokens"

    @classmethod
    def key_env(cls, spec: ModelSpec) -> str | None:
        return API_KEY_ENV

    def _base_url(self) -> str | None:
        base_url = self.spec.options.get("base_url")
        return str(base_url) if base_url else None

    def _api_key(self) -> str:
        key = os.environ.get(API_KEY_ENV)
        if not key:
            raise ValueError(f"model {self.spec.id!r}: set {API_KEY_ENV} to use the openai backend")
        return key
