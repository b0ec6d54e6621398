"""Sem-F1: sentence-level semantic overlap measured with sentence embeddings.

Both texts are split into sentences. Precision is the mean, over candidate sentences, of the best
cosine similarity to any reference sentence; recall is the same from the reference side; Sem-F1 is
their harmonic mean (0 when either is 0 or below). A value past 1 by a cosine's floating rounding is 1; anything
further is an error (`metrics.base.in_range`), never clipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from narrative_eval.errors import ModelLoadError
from narrative_eval.metrics.base import Metric, cached_model, metric
from narrative_eval.metrics.text import split_sentences
from narrative_eval.quiet import no_weight_loading_bar
from narrative_eval.records import MetricsSpec
from narrative_eval.weights import load_checked, resolve_weights

DEFAULT_MODEL = "embedded:all-minilm-l6-v2"
"""Sentence-embedding model when none is configured."""
DEFAULT_BATCH_SIZE = 64
"""Sentences per forward pass."""
WHAT = "Sem-F1 sentence-embedding model"
"""How errors name the model."""


def transformer_directory(model_path: str) -> str:
    """Where a sentence-transformers model keeps its transformer's weights: the folder its modules.json names for
    its first module (the model's own folder when it has no modules.json, as for a plain transformers model)."""
    modules = Path(model_path) / "modules.json"
    if not modules.is_file():
        return model_path
    first = (json.loads(modules.read_text(encoding="utf-8")) or [{}])[0]
    return str(Path(model_path) / first.get("path", ""))


def sentence_encoder(model_path: str):
    """The process-wide SentenceTransformer for a local model path (CPU), its transformer's weights checked whole.

    sentence-transformers loads a model whose weights are missing with random ones and only logs it, so the
    transformer is first loaded through `load_checked` (an error when it is not whole) and its weights are then
    the encoder's, taken strictly: every one of them, by name and shape.
    """

    def load():
        from sentence_transformers import SentenceTransformer
        from transformers import AutoModel

        with no_weight_loading_bar():
            checked = load_checked(AutoModel, transformer_directory(model_path), what=WHAT)
            encoder = SentenceTransformer(model_path, device="cpu")
        try:
            encoder[0].auto_model.load_state_dict(checked.state_dict(), strict=True)
        except RuntimeError as error:
            raise ModelLoadError(f"{WHAT} at {model_path}: sentence-transformers built a "
                                 f"{type(encoder[0].auto_model).__name__}, which does not take the weights of the "
                                 f"{type(checked).__name__} its config names ({str(error).splitlines()[0]})") from error
        return encoder

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

    def load(self) -> None:
        sentence_encoder(self.model_path)

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
