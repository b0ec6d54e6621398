"""METEOR via NLTK (exact, Porter-stem and WordNet-synonym matching) on regex-tokenised lower-cased words.

NLTK's behaviour is kept as is, since it is what published evaluations ran: the synonym stage looks up
the Porter stems left over from the stem stage (so "car"/"auto" match but "car"/"automobile" do not),
and a repeated word aligns to its last occurrence.
"""

from __future__ import annotations

import warnings

from narrative_eval.metrics.base import Metric, cached_model, metric
from narrative_eval.metrics.text import tokenize_words
from narrative_eval.metrics.wordnet import ensure_wordnet

ALPHA = 0.9
"""Precision/recall weight in the F-mean (NLTK's and the original METEOR's default)."""
BETA = 3.0
"""Fragmentation penalty exponent."""
GAMMA = 0.5
"""Fragmentation penalty weight."""


class _MemoisedSynsets:
    """WordNet seen through a memo of `synsets(word)`, the one lookup NLTK's METEOR makes.

    NLTK repeats the lookup (with morphological analysis) for every unmatched word of every pair;
    caching it gives the same scores faster on a batch.
    """

    def __init__(self, wordnet) -> None:
        self._wordnet = wordnet
        self._synsets: dict[str, list] = {}

    def synsets(self, word: str):
        found = self._synsets.get(word)
        if found is None:
            found = self._synsets[word] = self._wordnet.synsets(word)
        return found


class _MemoisedStemmer:
    """A Porter stemmer with a memo: METEOR stems every unmatched word of every pair."""

    def __init__(self, stemmer) -> None:
        self._stemmer = stemmer
        self._stems: dict[str, str] = {}

    def stem(self, word: str) -> str:
        found = self._stems.get(word)
        if found is None:
            found = self._stems[word] = self._stemmer.stem(word)
        return found


def _english_wordnet():
    """NLTK's WordNet reader without the map onto WordNet 3.0 senses that it builds on every load for the Open
    Multilingual Wordnet (half of the load's 3-4 s): METEOR looks up English synsets, which never read that map."""
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The multilingual functions are not available")
        return EnglishWordNet(nltk.data.find("corpora/wordnet"), omw_reader=None)


def _meteor_resources():
    def load():
        ensure_wordnet()
        from nltk.stem.porter import PorterStemmer

        # Reading the corpus now makes a broken WordNet fail here, not inside the first score.
        return _MemoisedStemmer(PorterStemmer()), _MemoisedSynsets(_english_wordnet())

    return cached_model(("meteor", "wordnet"), load)


@metric("meteor", in_at_avg=True, label="METEOR")
class Meteor(Metric):
    """NLTK's meteor_score with one reference per candidate."""

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        from nltk.translate.meteor_score import meteor_score

        stemmer, wordnet = _meteor_resources()
        scores = []
        for cand, ref in zip(candidates, references):
            cand_tokens, ref_tokens = tokenize_words(cand), tokenize_words(ref)
            if not cand_tokens or not ref_tokens:
                # Defensive: the tokenizer keeps every non-space character, so this only guards odd input.
                scores.append(0.0)
                continue
            scores.append(
                meteor_score(
                    [ref_tokens], cand_tokens, stemmer=stemmer, wordnet=wordnet, alpha=ALPHA, beta=BETA, gamma=GAMMA
                )
            )
        return scores
