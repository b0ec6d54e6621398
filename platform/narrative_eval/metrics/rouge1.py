"""ROUGE-1 F-measure (unigram overlap) via the `rouge-score` package, without stemming."""

from __future__ import annotations

from narrative_eval.metrics.base import Metric, cached_model, metric


def _rouge_scorer():
    from rouge_score import rouge_scorer

    return cached_model(("rouge1", "no-stemmer"), lambda: rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False))


@metric("rouge1", in_at_avg=True, label="ROUGE-1")
class Rouge1(Metric):
    """ROUGE-1 F: harmonic mean of unigram precision and recall (rouge-score's own tokenizer)."""

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        scorer = _rouge_scorer()
        # rouge-score's signature is score(target, prediction): the reference comes first.
        return [scorer.score(ref, cand)["rouge1"].fmeasure for cand, ref in zip(candidates, references)]
