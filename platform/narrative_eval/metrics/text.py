"""Deterministic, download-free tokenisation and sentence splitting for the metrics."""

from __future__ import annotations

import re

# Acronyms ("u.s."), numbers with separators ("3.5", "1,000"), words keeping inner apostrophes and
# hyphens ("don't", "well-known"), or single punctuation marks: close to NLTK's word_tokenize
# without needing the punkt download.
_TOKEN = re.compile(r"(?:[^\W\d_]\.){2,}|\d+(?:[.,]\d+)+|\w+(?:['’\-]\w+)*|[^\w\s]")

# The benchmark joins sentence lists with ' <eos> '; it is always a sentence boundary.
_EOS_MARKER = re.compile(r"\s*<eos>\s*", re.IGNORECASE)

# A sentence ends at . ! ? or … (optionally followed by closing quotes/brackets) and then whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+")

# Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e no gen col lt sgt capt gov sen rep inc ltd co corp u.s".split()
)


def tokenize_words(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens."""
    return _TOKEN.findall(text.lower())


def split_sentences(text: str) -> list[str]:
    """Split a text into sentences (regex based; '<eos>' markers are hard boundaries).

    A period after a known abbreviation or a single capital initial does not split.
    Whitespace-only pieces are dropped; a text without any terminator is one sentence.
    """
    sentences: list[str] = []
    for block in _EOS_MARKER.split(text):
        pending = ""
        start = 0
        for match in _SENTENCE_END.finditer(block):
            piece = block[start : match.start()] + block[match.start() : match.end()].rstrip()
            start = match.end()
            candidate = (pending + " " + piece).strip() if pending else piece.strip()
            if _ends_with_abbreviation(candidate):
                pending = candidate
                continue
            sentences.append(candidate)
            pending = ""
        tail = block[start:].strip()
        rest = (pending + " " + tail).strip() if pending else tail
        if rest:
            sentences.append(rest)
    return [s for s in sentences if s.strip()]


def _ends_with_abbreviation(sentence: str) -> bool:
    stripped = sentence.rstrip("\"'”’)] ")
    if not stripped.endswith("."):
        return False
    last_word = stripped[:-1].rsplit(maxsplit=1)[-1] if stripped[:-1].split() else ""
    last_word = last_word.lstrip("\"'“‘([").lower()
    if last_word in _ABBREVIATIONS:
        return True
    # A single capital letter such as the "J." in "J. R. R. Tolkien".
    return len(last_word) == 1 and last_word.isalpha() and stripped[-2].isupper()
