"""Sem-F1: sentence-level semantic overlap measured with sentence embeddings.

Both texts are split into sentences. Precision is the mean, over candidate sentences, of the best
cosine similarity to any reference sentence; recall is the same from the reference side; Sem-F1 is
their harmonic mean (0 when either is 0), clipped to [0, 1].
"""

from __future__ import annotations

import numpy as np

from narrative_eval.metrics.base import Metric, cached_model, metric
from narrative_eval.metrics.text import split_sentences
from narrative_eval.quiet import no_weight_loading_bar
from narrative_eval.records import MetricsSpec
from narrative_eval.weights import resolve_weights

DEFAULT_MODEL = "embedded:all-minilm-l6-v2"
"""Sentence-embedding model when none is configured."""
DEFAULT_BATCH_SIZE = 64
"""Sentences per forward pass."""


def sentence_encoder(model_path: str):
    """The process-wide SentenceTransformer for a local model path (CPU)."""

    def load():
        from sentence_transformers import SentenceTransformer

        with no_weight_loading_bar():
            return SentenceTransformer(model_path, device="cpu")

    return cached_model(("sentence-transformers", model_path), load)


def sem_f1_from_similarity(similarity: np.ndarray) -> float:
    """Sem-F1 from a (candidate sentences x reference sentences) cosine-similarity matrix."""
    precision = float(similarity.max(axis=1).mean())
    recall = float(similarity.max(axis=0).mean())
    if precision <= 0.0 or recall <= 0.0:
        return 0.0
    return 2.0 * precision * recall / (precision + recall)


@metric("semf1", in_at_avg=True, label="Sem-F1")
class SemF1(Metric):
    """Sentence-embedding precision/recall/F1 between candidate and reference."""

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.model_path = resolve_weights(model)
        """Local sentence-transformers model directory."""
        self.batch_size = batch_size
        """Sentences per forward pass."""

    @classmethod
    def from_spec(cls, spec: MetricsSpec) -> SemF1:
        return cls(model=spec.embedding_model)

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        cand_sentences = [split_sentences(text) for text in candidates]
        ref_sentences = [split_sentences(text) for text in references]
        # One encode call for the whole batch; repeated sentences are embedded once.
        unique = list(dict.fromkeys(s for group in (*cand_sentences, *ref_sentences) for s in group))
        embeddings = sentence_encoder(self.model_path).encode(
            unique,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        row_of = {sentence: i for i, sentence in enumerate(unique)}
        scores = []
        for cand, ref in zip(cand_sentences, ref_sentences):
            cand_vectors = embeddings[[row_of[s] for s in cand]]
            ref_vectors = embeddings[[row_of[s] for s in ref]]
            scores.append(sem_f1_from_similarity(cand_vectors @ ref_vectors.T))
        return scores
