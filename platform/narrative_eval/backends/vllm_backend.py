"""vLLM's offline `LLM` engine, for GPU machines (optional extra `vllm`; never imported on CPU).

The whole batch goes to the engine in one `LLM.chat` call, so vLLM's continuous batching
schedules it; each request carries its own SamplingParams with the seed. A JSON schema
becomes structured output (`StructuredOutputsParams(json=...)`, or `GuidedDecodingParams`
on vLLM releases before the rename). Options:

- `tensor_parallel_size` (default 1), `gpu_memory_utilization` (0.9), `max_model_len`,
  `dtype` ('auto'), `enforce_eager`, `tokenizer` (for GGUF weights), `quantization`
  (vLLM's method name; by default it is read from the checkpoint, and 'bnb-nf4' maps to
  'bitsandbytes'), `engine_args` (a dict passed to `LLM` as is).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from narrative_eval.backends.base import Backend, Conversation, backend
from narrative_eval.backends.transformers_backend import weights_identity
from narrative_eval.embedded import resolve_weights
from narrative_eval.records import GenerationParams, ModelSpec, Reply

# ModelSpec.quantization labels that need an explicit vLLM method; GPTQ/AWQ checkpoints
# declare theirs in config.json and vLLM picks its fastest kernel for them.
VLLM_QUANTIZATION = {"bnb-nf4": "bitsandbytes", "bnb-8bit": "bitsandbytes"}
ENGINE_OPTIONS = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "enforce_eager", "tokenizer", "seed")


def structured_json(schema: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams keyword for JSON-schema-constrained output on the installed vLLM."""
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:  # vLLM < 0.11 named it guided decoding
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}
    return {"structured_outputs": StructuredOutputsParams(json=schema)}


@backend("vllm")
class VllmBackend(Backend):
    supports_json_schema = True

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        from vllm import LLM

        options = dict(spec.options)
        self.path = resolve_weights(spec.weights)
        engine_args: dict[str, Any] = {"tensor_parallel_size": 1}
        engine_args.update({name: options[name] for name in ENGINE_OPTIONS if name in options})
        quantization = options.get("quantization") or VLLM_QUANTIZATION.get(spec.quantization or "")
        if quantization:
            engine_args["quantization"] = quantization
        engine_args.update(options.get("engine_args", {}))
        self.chat_template = options.get("chat_template")
        self.llm = LLM(model=self.path, **engine_args)

    def identity(self) -> str:
        return weights_identity(self.path, self.spec.options.get("revision"))

    def sampling_params(self, params: GenerationParams):
        from vllm import SamplingParams

        kwargs: dict[str, Any] = {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
            "seed": params.seed,
            "stop": list(params.stop) or None,
        }
        if params.json_schema is not None:
            kwargs.update(structured_json(params.json_schema))
        return SamplingParams(**kwargs)

    def generate(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]:
        if not conversations:
            return []
        messages = [[{"role": m.role, "content": m.content} for m in conversation] for conversation in conversations]
        start = time.perf_counter()
        try:
            outputs = self.llm.chat(
                messages,
                sampling_params=self.sampling_params(params),
                use_tqdm=False,
                chat_template=self.chat_template,
            )
        except ValueError as error:  # a prompt longer than max_model_len fails the whole call
            if len(conversations) == 1:
                return [Reply(text="", finish_reason="length", error=f"{type(error).__name__}: {error}")]
            # Find the offending prompt(s) one by one; the others still get their replies.
            return [reply for conversation in conversations for reply in self.generate([conversation], params)]
        # One engine call serves the batch; each reply gets an equal share of its wall time,
        # so summed seconds stay the batch's real time.
        share = (time.perf_counter() - start) / len(conversations)
        replies = []
        for output in outputs:
            completion = output.outputs[0]
            replies.append(
                Reply(
                    text=completion.text,
                    finish_reason="length" if completion.finish_reason == "length" else "stop",
                    prompt_tokens=len(output.prompt_token_ids or []),
                    completion_tokens=len(completion.token_ids),
                    seconds=share,
                )
            )
        return replies

    def close(self) -> None:
        # vLLM frees GPU memory when the engine is collected.
        del self.llm
        import gc

        gc.collect()
