"""BERTScore F1 via the `bert-score` package's BERTScorer.

Greedy matching of contextual token embeddings from one layer of the model: each candidate token's
best cosine match among reference tokens gives precision, the converse gives recall, F1 their harmonic
mean. [CLS]/[SEP] are excluded (bert-score gives them zero weight), no idf weighting, no baseline
rescaling. The project default is the embedded all-MiniLM-L6-v2 at its last (6th) layer, because it
ships offline; the published study used roberta-large at bert-score's default layer (17), which is one
config line away: bertscore_model='roberta-large', bertscore_layers=None (needs those weights locally).

bert-score 0.3.13 runs unchanged on transformers 5 for BERT-family models; tests/metrics checks its
numbers against a direct computation of the definition from the model's hidden states.
"""

from __future__ import annotations

from narrative_eval.metrics.base import Metric, cached_model, metric
from narrative_eval.quiet import no_weight_loading_bar
from narrative_eval.records import MetricsSpec
from narrative_eval.weights import resolve_weights

DEFAULT_MODEL = "embedded:all-minilm-l6-v2"
"""BERTScore model when none is configured."""
DEFAULT_LAYERS = 6
"""Layer of the default model whose embeddings are matched (its last)."""
DEFAULT_BATCH_SIZE = 64
"""Sentences per forward pass."""


def _bert_scorer(model_path: str, num_layers: int | None):
    def load():
        from bert_score import BERTScorer
        from bert_score.utils import model2layers

        if num_layers is None and model_path not in model2layers:
            raise ValueError(
                f"bert-score has no default layer for {model_path!r}; set MetricsSpec.bertscore_layers"
            )
        with no_weight_loading_bar():
            return BERTScorer(
                model_type=model_path,
                num_layers=num_layers,
                idf=False,
                rescale_with_baseline=False,
                device="cpu",
                batch_size=DEFAULT_BATCH_SIZE,
            )

    return cached_model(("bertscore", model_path, num_layers), load)


@metric("bertscore", in_at_avg=True, label="BERTScore")
class BertScore(Metric):
    """BERTScore F1 of each candidate against its reference."""

    def __init__(
        self, model: str = DEFAULT_MODEL, num_layers: int | None = DEFAULT_LAYERS, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        self.model_path = resolve_weights(model)
        """Local model directory (or hub id, which must already be cached: loading is offline)."""
        self.num_layers = num_layers
        """Layer whose embeddings are matched; None for bert-score's default for a known model."""
        self.batch_size = batch_size
        """Sentences per forward pass."""

    @classmethod
    def from_spec(cls, spec: MetricsSpec) -> BertScore:
        return cls(model=spec.bertscore_model, num_layers=spec.bertscore_layers)

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        scorer = _bert_scorer(self.model_path, self.num_layers)
        _, _, f1 = scorer.score(candidates, references, verbose=False, batch_size=self.batch_size)
        return [float(value) for value in f1.tolist()]
