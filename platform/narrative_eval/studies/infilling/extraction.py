"""Answer extraction: every reply gets an answer (or None) and a status saying how it was found.

Order, as in the infilling study's extraction table:
1. drop reasoning up to and including the last `</think>`;
2. `<ANSWER>...</ANSWER>` (case-insensitive), then its common near-misses (unclosed tag,
   square brackets, an `Answer:` label);
3. an echo of the passage with the blank filled: cut the reply at the text around the blank;
4. the whole reply, marked `fallback` so the run's extraction rate stays honest;
5. `none` when nothing is left.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from narrative_eval.data.instances import BLANK_RE
from narrative_eval.studies.infilling.records import ExtractionResult

THINK_END = re.compile(r"</think>", re.IGNORECASE)
TAGGED = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)
BRACKETED = re.compile(r"\[\s*answer\s*\](.*?)\[\s*/\s*answer\s*\]", re.IGNORECASE | re.DOTALL)
OPEN_TAG = re.compile(r"<\s*answer\s*>(.*)", re.IGNORECASE | re.DOTALL)
CLOSE_ONLY = re.compile(r"^(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)
LABEL = re.compile(r"^\s*(?:answer|missing text|filled text)\s*:\s*(.+)", re.IGNORECASE | re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_ANCHOR = 12


def _clean(text: str) -> str:
    text = text.strip().strip('"“”').strip()
    return re.sub(r"\s+", " ", text)


def _usable(candidate: str, ignore: set[str]) -> bool:
    cleaned = _clean(candidate)
    return bool(cleaned) and not BLANK_RE.search(cleaned) and cleaned.lower() not in ignore


def _from_tags(reply: str, ignore: set[str]) -> str | None:
    for pattern in (TAGGED, BRACKETED):
        for match in pattern.finditer(reply):
            if _usable(match.group(1), ignore):
                return _clean(match.group(1))
    # Near-misses: an opening tag never closed, or only the closing tag.
    for pattern in (OPEN_TAG, CLOSE_ONLY):
        match = pattern.search(reply)
        if match:
            # Keep the first paragraph: models often ramble on after the answer.
            text = re.split(r"\n\s*\n", match.group(1).strip())[0]
            text = re.sub(r"<\s*/?\s*answer\s*>", "", text, flags=re.IGNORECASE)
            if _usable(text, ignore):
                return _clean(text)
    match = LABEL.search(reply)
    if match:
        text = re.split(r"\n\s*\n", match.group(1).strip())[0]
        if _usable(text, ignore):
            return _clean(text)
    return None


def _anchors(context: str, from_end: bool) -> list[str]:
    """Pieces of the context to look for in an echo: the sentence next to the blank, then shorter tails."""
    context = _clean(context)
    if not context:
        return []
    sentences = [s for s in SENTENCE_END.split(context) if s]
    near = sentences[-1] if from_end else sentences[0]
    anchors = [near]
    for size in (60, 30, MIN_ANCHOR + 4):
        if len(near) > size:
            anchors.append(near[-size:] if from_end else near[:size])
    return [a for a in anchors if len(a) >= MIN_ANCHOR or a == context]


def _from_echo(reply: str, problem: str, ignore: set[str]) -> str | None:
    match = BLANK_RE.search(problem)
    if not match:
        return None
    before, after = problem[: match.start()], problem[match.end() :]
    text = _clean(reply)
    lowered = text.lower()
    start, found_before = 0, False
    for anchor in _anchors(before, from_end=True):
        index = lowered.find(anchor.lower())
        if index >= 0:
            start, found_before = index + len(anchor), True
            break
    end, found_after = len(text), False
    for anchor in _anchors(after, from_end=False):
        index = lowered.find(anchor.lower(), start)
        if index >= 0:
            end, found_after = index, True
            break
    # An echo must reproduce the context on every side the blank has.
    if (before.strip() and not found_before) or (after.strip() and not found_after):
        return None
    if not (found_before or found_after):
        return None
    candidate = text[start:end]
    return _clean(candidate) if _usable(candidate, ignore) else None


ECHO_ANCHOR = 30
"""Characters of the passage next to its blank a fill must repeat to count as repeating the passage."""


def repeats_passage(answer: str | None, problem: str) -> bool:
    """Whether a fill repeats the passage's own text next to its blank (the sentence before or after it, or 30 of
    its characters): what a model that echoes the passage instead of only filling the blank gives, when the echo
    could not be cut back to the fill (the blank kept, the text around it changed)."""
    match = BLANK_RE.search(problem)
    if not answer or not match:
        return False
    text = _clean(answer).lower()
    sides = ((problem[: match.start()], True), (problem[match.end() :], False))
    for context, from_end in sides:
        anchors = _anchors(context, from_end)
        # The whole sentence next to the blank (unless a few words only), or a long enough piece of it.
        pieces = [a for i, a in enumerate(anchors) if len(a) >= ECHO_ANCHOR or (i == 0 and len(a) >= MIN_ANCHOR)]
        if any(piece.lower() in text for piece in pieces):
            return True
    return False


def extract_answer(reply: str, problem: str, ignore_answers: Iterable[str] = ()) -> ExtractionResult:
    """Pull the fill out of a raw model reply for an infilling problem."""
    ignore = {a.lower() for a in ignore_answers}
    think_removed = False
    if THINK_END.search(reply):
        reply = THINK_END.split(reply)[-1]
        think_removed = True
    answer = _from_tags(reply, ignore)
    if answer:
        return ExtractionResult(answer=answer, status="tag", think_removed=think_removed)
    answer = _from_echo(reply, problem, ignore)
    if answer:
        return ExtractionResult(answer=answer, status="echo", think_removed=think_removed)
    whole = _clean(re.sub(r"<\s*/?\s*answer\s*>", "", reply, flags=re.IGNORECASE))
    if whole and whole.lower() not in ignore:
        return ExtractionResult(answer=whole, status="fallback", think_removed=think_removed)
    return ExtractionResult(answer=None, status="none", think_removed=think_removed)
