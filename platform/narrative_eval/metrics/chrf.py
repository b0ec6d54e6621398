"""chrF (character n-gram F-score, beta=2) via sacrebleu, sentence level, scaled to [0, 1]."""

from __future__ import annotations

from narrative_eval.metrics.base import Metric, cached_model, metric

CHAR_ORDER = 6
"""Character n-gram orders 1..6, sacrebleu's chrF default."""
WORD_ORDER = 0
"""No word n-grams: plain chrF, not chrF++."""
BETA = 2
"""Recall weighted twice as much as precision."""


def _chrf():
    from sacrebleu.metrics import CHRF

    return cached_model(
        ("chrf", CHAR_ORDER, WORD_ORDER, BETA),
        lambda: CHRF(char_order=CHAR_ORDER, word_order=WORD_ORDER, beta=BETA),
    )


@metric("chrf", in_at_avg=True, label="chrF")
class ChrF(Metric):
    """sacrebleu's sentence-level chrF divided by 100."""

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        chrf = _chrf()
        return [chrf.sentence_score(cand, [ref]).score / 100.0 for cand, ref in zip(candidates, references)]
