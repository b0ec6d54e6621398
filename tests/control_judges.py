"""Judges whose answers to control items are known by construction, as real registered backends (messages in,
JSON reply out, through the request cache), and short stories for the shipped writing tasks.

- control-oracle: knows which texts are good (a gold fill with its passage, a story with its brief), the refusal
  and the neutral filler a padded control adds; scores a good text at the top of every scale and anything else at
  the bottom; in a pair it prefers the good story to the refusal or its padded copy and ties a story with itself.
- control-constant: the same score (the middle one unless told), a tie, whatever it is shown.
- control-always-a: the oracle, except that every pair goes to the response shown as A.
- control-random: every score drawn at random from the scale (seeded by the request's seed and text), a judge that
  agrees with itself only by chance; in a pair a coin picks the side (never a tie), so two of its verdicts on one
  pair point the same way half the time.

Each builds its answer from the JSON schema the judge request carries, so it answers every rubric the way a
constrained decoder would: every key the rubric asks for, every value one the rubric allows.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from narrative_eval.backends import Backend, CachedBackend, RequestCache, backend, get_backend
from narrative_eval.data.instances import load_instances
from narrative_eval.judges.checks import filler_sentences
from narrative_eval.records import InfillingInstance, JudgeSpec, ModelSpec, Reply, stable_hash
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.tasks import load_tasks

REPO = Path(__file__).resolve().parents[1]


@cache
def shipped_instances() -> tuple[InfillingInstance, ...]:
    """The shipped infilling benchmark (several passages per domain, so every instance has a mismatched fill)."""
    return tuple(load_instances(REPO / "data/infilling/benchmark.csv"))


@cache
def shipped_tasks() -> tuple[WritingTask, ...]:
    """The shipped writing tasks with their checklists."""
    return tuple(load_tasks(REPO / "data/creative/tasks.json"))


# Stories for four of the shipped tasks (data/creative), each following its brief loosely, several sentences long.
STORIES: dict[str, str] = {
    "fantasy_001": (
        "I owed the river spirit a map, and in our mountain town the spring thaw had come to collect. The spirit "
        "rose from the meltwater and asked for a map of a place that does not exist yet. I told it that ink "
        "remembers what water forgets, and it laughed like ice breaking. All night I worked by the window. At dawn "
        "I knelt on the bank and drew the first line of the new map on the surface of the river itself."
    ),
    "historical_fiction_002": (
        "Name. The family on the last farm in the county would not give me theirs. Age. The grandmother said she "
        "was older than Oklahoma and younger than her grief. Occupation. They grew wheat when the rain allowed and "
        "waited when it did not. Instead of answers they gave me supper, cornbread and beans, in the spring of "
        "1940. I left the line blank and wrote the date beside it."
    ),
    "mystery_003": (
        "Agnes Pell had certified four hundred wills and never one that left everything to a parrot. The signature "
        "leaned the wrong way, and she said so to the nephew. The parrot, Horace, said a signature is only a habit "
        "of the hand. Agnes checked the dead man's letters and found he had broken his wrist that winter. The will "
        "was genuine after all: the man had trusted the bird more than his family."
    ),
    "comedy_001": (
        "Dr. Barnaby Straw held a doctorate in ornithology, which the crows found more useful than frightening. "
        "They brought him their theses and asked whether their methods were sound or merely wing-ing it. He told "
        "one young crow that her paper had been peer-reviewed by pigeons, which was no compliment. The farmer "
        "walked past once, said nothing, and left. By autumn the crows offered the scarecrow a permanent "
        "professorship, with tenure and a very nice perch."
    ),
}


def answer(schema: Mapping[str, Any], decision: str, defs: Mapping[str, Any] | None = None,
           rng: random.Random | None = None) -> Any:
    """A value valid under `schema` that says `decision`: good (top of a scale), bad (bottom), middle (the middle
    score), random (any score, drawn from `rng`), or for verdict and facet labels A, B or tie (the labels of a
    pairwise rubric)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return answer(defs[schema["$ref"].rsplit("/", 1)[-1]], decision, defs, rng)
    if "anyOf" in schema:
        return answer(next(s for s in schema["anyOf"] if s.get("type") != "null"), decision, defs, rng)
    if schema.get("type") == "object":
        return {key: answer(sub, decision, defs, rng) for key, sub in schema["properties"].items()}
    enum = schema.get("enum")
    if enum and all(isinstance(v, (int, float)) for v in enum):
        ordered = sorted(enum)
        if decision == "random" and rng is not None:
            return rng.choice(ordered)
        return {"good": ordered[-1], "bad": ordered[0]}.get(decision, ordered[len(ordered) // 2])
    if enum:
        if "tie" not in enum:
            return enum[-1]  # a requirement status: "missing" needs no quote
        if decision == "random" and rng is not None:  # a coin for the side, then any of that side's labels
            side = rng.choice(("A", "B"))
            return rng.choice([label for label in enum if label.upper().startswith(side)])
        side = [label for label in enum if label.upper().startswith(decision)] if decision in ("A", "B") else []
        return (side[0] if decision == "A" else side[-1]) if side else "tie"
    return ""


def is_pairwise(schema: Mapping[str, Any]) -> bool:
    """Whether a judge request's answer schema is a pairwise rubric's (verdict labels with a tie)."""
    return any("tie" in (sub.get("enum") or ()) for sub in schema.get("properties", {}).values())


class SchemaJudge(Backend):
    """A judge that decides from the user message and answers under the request's schema."""

    supports_json_schema = True

    def decide(self, text: str, pairwise: bool) -> str:
        raise NotImplementedError

    def generate(self, conversations, params):
        replies = []
        for conversation in conversations:
            schema = params.json_schema or {}
            decision = self.decide(conversation[-1].content, is_pairwise(schema))
            replies.append(Reply(text=json.dumps(answer(schema, decision)), prompt_tokens=1, completion_tokens=1))
        return replies


@backend("control-oracle")
class OracleJudge(SchemaJudge):
    """Right by construction: options['good'] lists [context, good text] pairs, options['refusal'] the refusal."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        self.good = [tuple(pair) for pair in spec.options.get("good", [])]
        self.refusal = spec.options.get("refusal", "")

    def decide(self, text: str, pairwise: bool) -> str:
        shown = [good for context, good in self.good if context in text and good in text]
        if not pairwise:  # a good text padded with filler is no longer the good text
            return "good" if shown and not any(sentence in text for sentence in filler_sentences()) else "bad"
        if not shown or text.count(shown[0]) > 1:
            return "tie"
        # Where the other response shows: the refusal, or the first filler sentence of a padded copy.
        others = [at for at in (text.rfind(self.refusal) if self.refusal else -1,
                                *(text.find(sentence) for sentence in filler_sentences())) if at >= 0]
        return "A" if not others or text.index(shown[0]) < min(others) else "B"


@backend("control-constant")
class ConstantJudge(SchemaJudge):
    """The same score and a tie, whatever it is shown: the middle of every scale, or options['decision'] (good: the
    top, as a judge that rates everything excellent)."""

    def decide(self, text: str, pairwise: bool) -> str:
        return self.spec.options.get("decision", "middle")


@backend("control-random")
class RandomJudge(Backend):
    """Every score at random from its scale, drawn afresh for each request (its seed and its text): its repeats
    agree only by chance."""

    supports_json_schema = True

    def generate(self, conversations, params):
        replies = []
        for conversation in conversations:
            rng = random.Random(stable_hash([params.seed, conversation[-1].content]))
            text = json.dumps(answer(params.json_schema or {}, "random", rng=rng))
            replies.append(Reply(text=text, prompt_tokens=1, completion_tokens=1))
        return replies


@backend("control-always-a")
class AlwaysAJudge(OracleJudge):
    """The oracle on single items; every pair goes to the response shown as A."""

    def decide(self, text: str, pairwise: bool) -> str:
        return "A" if pairwise else super().decide(text, pairwise)


def control_judge(kind: str, good: Sequence[tuple[str, str]] = (), refusal: str = "",
                  cache_dir: Path | None = None, **options: Any) -> tuple[CachedBackend, JudgeSpec]:
    """A registered control judge behind a request cache in `cache_dir` (none without it), and its JudgeSpec;
    `options` go to the backend with what it knows."""
    options = {"good": [list(pair) for pair in good], "refusal": refusal, **options}
    spec = ModelSpec(id=kind, backend=kind, weights=f"{kind}:{stable_hash(options)}", options=options)
    cache = RequestCache(cache_dir / "requests.sqlite") if cache_dir is not None else None
    return CachedBackend(get_backend(spec), cache), JudgeSpec(id=kind, model=spec, max_retries=1)


__all__ = ["STORIES", "AlwaysAJudge", "ConstantJudge", "OracleJudge", "RandomJudge", "answer", "control_judge", "shipped_instances",
           "shipped_tasks"]
