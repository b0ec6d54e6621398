"""Control items with known answers, judged the way real items are, and the thresholds their checks must meet.

A study builds control items from its data (a gold fill against a wrong one, a story against its shuffled
sentences, two identical replies...); every judge of a sweep judges them through the same cached backend, rubric
renderer, validation and retries as real items, so a reply that never validates is a recorded failure here too.
`stats.judge_checks` turns the judgments into one verdict per judge x rubric x check against the thresholds of
`checks.yaml` (each with its reason). Which instances become controls is `sample_ids`: the same for every judge,
and stable as the data grows.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from narrative_eval.data.instances import sentences
from narrative_eval.judges.judge import GeneratingBackend, combine_orders
from narrative_eval.judges.resumable import JudgedItem, Progress, json_form, judge_items
from narrative_eval.judges.rubric import load_rubric
from narrative_eval.records import JudgeResult, JudgeSpec, derived_seed, stable_hash

THRESHOLDS_FILE = Path(__file__).with_name("checks.yaml")
"""The shipped thresholds of every check, with their reasons."""

FILLER_FILE = Path(__file__).with_name("filler.yaml")
"""The neutral sentences the length-bias control pads an output with."""

PADDING_SHARE = 0.3
"""Words a padded control adds, as a share of the output's own words (at least)."""

PADDED = "padded_output"
"""Check name of the length-bias control: an output against itself padded with neutral filler."""

CONTROL_TEXTS_FILE = Path(__file__).with_name("controls.yaml")
"""The fixed texts of the controls every study gets (the refusal)."""

REFUSAL, SHUFFLED, IDENTICAL, REFUSAL_PAIR = "refusal", "shuffled_sentences", "identical_pair", "refusal_pair"
"""The checks `controls_for` makes, by the rubric's kind."""

DEFAULT_CONTROLS = 20
"""Instances a study turns into control items per check (K)."""

Relation = Literal["below_reference", "near_zero", "tie", "a_preferred", "padded_not_above", "padded_not_preferred"]
"""What a control item should get from a sound judge:
below_reference: a lower judge average than its known-good reference item (discrimination);
near_zero: a judge average near 0, as a checklist's adherence for a refusal (adherence);
tie: pairwise, the two responses are the same text: tie in both orders (tie rate);
a_preferred: pairwise, response_a should win in both presentation orders (discrimination);
padded_not_above: the reference output padded with neutral filler, no higher a judge average than it (length bias);
padded_not_preferred: pairwise, response_b is response_a padded with neutral filler and must not win (length bias)."""

STATISTIC_OF: dict[str, str] = {
    "below_reference": "discrimination",
    "near_zero": "adherence",
    "tie": "tie_rate",
    "a_preferred": "discrimination",
    "padded_not_above": "length_bias",
    "padded_not_preferred": "length_bias",
}
"""The statistic a relation is measured by (the thresholds file has one section per statistic)."""

REFERENCE_RELATIONS = frozenset({"below_reference", "padded_not_above"})
"""The relations whose control is judged against a known-good reference item under the same rubric."""

PAIRWISE_RELATIONS = frozenset({"tie", "a_preferred", "padded_not_preferred"})
"""The relations of pairwise controls (judged in both presentation orders)."""

@dataclass(frozen=True)
class ControlItem:
    """One control item: what a judge is shown under one rubric, and what a sound judge answers."""

    rubric: str
    """Rubric name the item is judged under (a pairwise rubric for a_preferred and tie)."""
    check: str
    """Name of the check the item belongs to (mismatched_fill, refusal, identical_pair, ...)."""
    instance_id: str
    """The instance or task the item was built from; items of one instance form a cluster in the intervals."""
    inputs: Mapping[str, Any] = field(hash=False)
    """The rubric's inputs for the control (e.g. {problem, candidate}); pairwise: {task, requirements, response_a, response_b}."""
    expected: Relation
    """What a sound judge gives the control (see Relation)."""
    reference: Mapping[str, Any] | None = field(default=None, hash=False)
    """The known-good item's inputs under the same rubric (below_reference, padded_not_above), e.g. the gold fill."""

    def __post_init__(self) -> None:
        if (self.expected in REFERENCE_RELATIONS) != (self.reference is not None):
            raise ValueError(f"control {self.check}/{self.instance_id}: a reference goes with "
                             f"{' and '.join(sorted(REFERENCE_RELATIONS))}, and only there")


@dataclass(frozen=True)
class ControlJudgment:
    """One judge's verdicts on one control item."""

    item: ControlItem
    """The control item."""
    result: JudgeResult
    """The verdict on the control (pairwise: both presentation orders, as judges.combine_orders combines them)."""
    reference: JudgeResult | None = None
    """The verdict on the item's known-good reference (below_reference only)."""

    @property
    def ok(self) -> bool:
        """Whether every verdict the item needs validated."""
        return self.result.ok and (self.reference is None or self.reference.ok)

    def record(self) -> dict[str, Any]:
        """The judgment as a JSON-ready record (what was shown is the item's instance and check, not its texts)."""
        return {"judge": self.result.judge_id, "rubric": self.item.rubric, "check": self.item.check,
                "instance_id": self.item.instance_id, "expected": self.item.expected, "ok": self.ok,
                "result": self.result.model_dump(mode="json"),
                "reference": self.reference.model_dump(mode="json") if self.reference is not None else None}


@dataclass(frozen=True)
class ControlSet:
    """Control items one judge judges with one setting: what a study gives a sweep for each of its judges."""

    judge: JudgeSpec
    """The judge as it judges these items (a pairwise rubric may give it its own token budget)."""
    items: tuple[ControlItem, ...]
    """The items, in order."""

    @property
    def requests(self) -> int:
        """Judge requests the items take at most: each distinct input of a scores or checklist rubric once per
        repeat of the judge (a reference serving several items too), each pairwise item twice (both orders) per
        repeat; retries not counted."""
        single = {(item.rubric, stable_hash(json_form(inputs))) for item in self.items
                  if item.expected not in PAIRWISE_RELATIONS
                  for inputs in (item.inputs, item.reference) if inputs is not None}
        return (len(single) + 2 * sum(item.expected in PAIRWISE_RELATIONS for item in self.items)) * self.judge.repeats


class JudgeChecks(BaseModel):
    """A sweep config's `judge_checks:` section: `{items: K}` (default K = 20), or `false` for no control checks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    items: int = Field(default=DEFAULT_CONTROLS, ge=0)
    """Instances (tasks) per judge that become control items, the same for every judge; 0: no checks."""

    @model_validator(mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        """`false` (or null) turns the checks off, `true` keeps the default K."""
        if value is None or value is False:
            return {"items": 0}
        return {} if value is True else value

    @property
    def enabled(self) -> bool:
        """Whether a sweep judges control items at all."""
        return self.items > 0


# --------------------------------------------------------------------------- thresholds


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    why: str = Field(min_length=1)
    """Why the threshold is where it is."""


class DiscriminationThreshold(_Section):
    """Discrimination fails below `min` or when its interval reaches `interval_excludes`."""

    min: float = Field(ge=0, le=1)
    """Lowest passing share of known-good items beating their control."""
    interval_excludes: float = Field(ge=0, le=1)
    """A value (chance) the interval's lower bound must stay above."""


class MaxThreshold(_Section):
    """A statistic that fails above `max`."""

    max: float = Field(ge=0, le=1)
    """Highest passing value (position bias: also lowest passing 1 - value)."""


class MinThreshold(_Section):
    """A statistic that fails below `min`."""

    min: float = Field(ge=0, le=1)
    """Lowest passing value."""


class LengthBiasThreshold(_Section):
    """Length bias fails above `max` or when its whole interval lies above `interval_excludes`."""

    max: float = Field(ge=0, le=1)
    """Highest passing share of padded outputs that win."""
    interval_excludes: float = Field(ge=0, le=1)
    """A value (an even split) the interval's lower bound must not exceed."""


class FailureThreshold(_Section):
    """A check fails whatever its value when too many of its items were never judged."""

    max_share: float = Field(ge=0, le=1)
    """Highest passing share of control items whose judgment never validated."""


class CheckThresholds(BaseModel):
    """The thresholds file: one section per statistic, the interval settings and the failure rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: float = Field(gt=0, lt=1)
    """Coverage of every interval."""
    n_boot: int = Field(ge=100)
    """Resamples of the bootstrap intervals."""
    discrimination: DiscriminationThreshold
    """Known-good items against their controls."""
    adherence: MaxThreshold
    """Checklist adherence given to a refusal."""
    position_bias: MaxThreshold
    """Share of A-preferences in both orders."""
    tie_rate: MinThreshold
    """Share of ties on identical pairs."""
    length_bias: LengthBiasThreshold
    """Share of padded outputs scored above (pairwise: preferred to) the output itself."""
    failures: FailureThreshold
    """Judgments that never validated."""


def load_thresholds(path: str | Path | None = None) -> CheckThresholds:
    """The check thresholds from a YAML file (default: the shipped judges/checks.yaml); ValueError names the file
    and every problem."""
    path = Path(path) if path is not None else THRESHOLDS_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return CheckThresholds.model_validate(data)
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {error}") from None
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, p['loc'])) or 'file'}: {p['msg']}" for p in error.errors())
        raise ValueError(f"{path}: {problems}") from None


# --------------------------------------------------------------------------- choosing instances


def sample_ids(ids: Iterable[str], k: int | None = DEFAULT_CONTROLS) -> list[str]:
    """The `k` ids whose stable hash is lowest (all when None or fewer), in their given order, duplicates dropped.

    The same for every judge and every run; when the data grows, an id stays chosen unless a new id hashes below
    it, so most controls of an earlier sweep are judged again (and come from the request cache)."""
    unique = list(dict.fromkeys(ids))
    if k is None or len(unique) <= k:
        return unique
    chosen = set(sorted(unique, key=lambda i: (stable_hash(i), i))[:k])
    return [i for i in unique if i in chosen]


def pick_other(key: str, candidates: Iterable[str]) -> str | None:
    """A stable partner for `key` among `candidates` (itself excluded): the one whose pairing hashes lowest, so a
    control's donor does not change as other candidates come and go, unless a new one hashes lower."""
    others = [c for c in candidates if c != key]
    return min(others, key=lambda c: (stable_hash([key, c]), c)) if others else None


# --------------------------------------------------------------------------- control texts


def shuffled_sentences(text: str, seed: int, key: str) -> str | None:
    """The text's sentences (data.instances.sentences) in a random order seeded by (seed, key), never the original
    order: a control that keeps every word but not the telling. None for a text of fewer than two sentences. The
    same text, seed and key give the same order, so a judge's verdict on it comes from the request cache."""
    parts = sentences(text)
    if len(parts) < 2:
        return None
    order = list(range(len(parts)))
    random.Random(derived_seed(seed, key)).shuffle(order)
    if order == sorted(order):
        order = order[1:] + order[:1]
    return " ".join(parts[i] for i in order)


def filler_sentences(path: str | Path | None = None) -> list[str]:
    """The neutral sentences of the filler file (default: the shipped judges/filler.yaml)."""
    path = Path(path) if path is not None else FILLER_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    found = [str(s).strip() for s in (data or {}).get("sentences", []) if str(s).strip()] if isinstance(data, dict) else []
    if not found:
        raise ValueError(f"{path}: needs a non-empty list of `sentences`")
    return found


def padded_text(text: str, seed: int, key: str, share: float = PADDING_SHARE, filler: Sequence[str] | None = None) -> str | None:
    """The text with neutral filler sentences (filler.yaml) inserted between its sentences until they add at least
    `share` of its words: longer, saying nothing more. The sentences and the places are seeded by (seed, key), like
    shuffled_sentences, so the same text, seed and key give the same padding (and its verdict the request cache's).
    None for a text without words."""
    parts = sentences(text) or ([text.strip()] if text.strip() else [])
    words = sum(len(part.split()) for part in parts)
    if not words:
        return None
    rng = random.Random(derived_seed(seed, key, "padded"))
    pool = list(filler if filler is not None else filler_sentences())
    rng.shuffle(pool)
    added, chosen = 0, []
    while added < share * words:
        sentence = pool[len(chosen) % len(pool)]
        chosen.append(sentence)
        added += len(sentence.split())
    padded = list(parts)
    for sentence in chosen:
        padded.insert(rng.randint(1, len(padded)), sentence)  # after the first sentence: the opening stays the output's
    return " ".join(padded)


def refusal_text(path: str | Path | None = None) -> str:
    """The refusal a control shows in place of an answer (controls.yaml's `refusal`)."""
    path = Path(path) if path is not None else CONTROL_TEXTS_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not str(data.get("refusal") or "").strip():
        raise ValueError(f"{path}: needs a non-empty `refusal` text")
    return str(data["refusal"]).strip()


def controls_for(rubric: str, instance_id: str, good: Mapping[str, Any], answer_inputs: Sequence[str],
                 refusal: str | None = None, seed: int = 0) -> list[ControlItem]:
    """The controls a rubric's kind calls for, from a known-good set of its inputs (`good`) whose `answer_inputs`
    show the answer (the rest are the context the answer is judged against):

    - checklist: refusal, the refusal in place of the answer, adherence near 0;
    - scores: shuffled_sentences, the answer's sentences in a seeded order (when it has two or more), and refusal,
      each below the known-good answer; padded_output, the answer padded with neutral filler, not above it (length
      bias);
    - pairwise (`good` holds the answer under `response_a`): identical_pair, the answer against itself, a tie in
      both orders; refusal_pair, the answer (A) against the refusal (B), A preferred in both orders.

    Which controls fit is a matter of what the judge sees, so every study's judges get these; controls that swap in
    another item's reference fit only a judge that sees the item's context, and are the study's (`ControlItem`)."""
    refusal = refusal or refusal_text()
    kind = load_rubric(rubric).kind
    if kind == "pairwise":
        answer = good["response_a"]
        return [ControlItem(rubric, IDENTICAL, instance_id, {**good, "response_b": answer}, "tie"),
                ControlItem(rubric, REFUSAL_PAIR, instance_id, {**good, "response_b": refusal}, "a_preferred")]
    refused = {**good, **{name: refusal for name in answer_inputs}}
    if kind == "checklist":
        return [ControlItem(rubric, REFUSAL, instance_id, refused, "near_zero")]
    items = []
    shuffled = {name: shuffled_sentences(str(good[name]), seed, instance_id) for name in answer_inputs}
    if answer_inputs and None not in shuffled.values():
        items.append(ControlItem(rubric, SHUFFLED, instance_id, {**good, **shuffled}, "below_reference", good))
    items.append(ControlItem(rubric, REFUSAL, instance_id, refused, "below_reference", good))
    padded = {name: padded_text(str(good[name]), seed, instance_id) for name in answer_inputs}
    if answer_inputs and None not in padded.values():
        items.append(ControlItem(rubric, PADDED, instance_id, {**good, **padded}, "padded_not_above", good))
    return items


# --------------------------------------------------------------------------- judging


def _judge_unique(backend: GeneratingBackend, judge: JudgeSpec, rubric: str, inputs: list[Mapping],
                  progress: Progress | None) -> dict[str, JudgeResult]:
    """Each distinct input judged once under a scores or checklist rubric (a gold fill serves several checks)."""
    unique = [JudgedItem(stable_hash(json_form(item)), item) for item in inputs]
    made = judge_items(lambda: backend, judge, rubric, list({item.key: item for item in unique}.values()),
                       progress=progress, label=f"controls: judge {judge.id} ({rubric})")
    return {judgment.key: judgment.result for judgment in made}


def _judge_pairs(backend: GeneratingBackend, judge: JudgeSpec, rubric: str, items: list[ControlItem],
                 progress: Progress | None) -> list[JudgeResult]:
    """Each pair judged in both presentation orders, the two verdicts combined."""
    pairs = [JudgedItem(str(index), item.inputs) for index, item in enumerate(items)]
    made = judge_items(lambda: backend, judge, rubric, pairs, progress=progress,
                       label=f"controls: judge {judge.id} ({rubric})")
    return [combine_orders(forward.result, swapped.result)
            for forward, swapped in zip(made[::2], made[1::2], strict=True)]


def judge_controls(backend: GeneratingBackend, judge: JudgeSpec, items: Sequence[ControlItem],
                   progress: Progress | None = None) -> list[ControlJudgment]:
    """Every control item judged by one judge, one ControlJudgment per item in order.

    Every item goes through judges.resumable.judge_items: under a scores or checklist rubric each distinct input
    once, under a pairwise rubric in both presentation orders, the two combined; replies that never validate after
    the judge's retries are failed results. `backend` is what the studies judge with (a CachedBackend), so nothing is asked twice."""
    judged: dict[int, ControlJudgment] = {}
    for rubric in dict.fromkeys(item.rubric for item in items):
        mine = [(index, item) for index, item in enumerate(items) if item.rubric == rubric]
        pairwise = load_rubric(rubric).kind == "pairwise"
        wrong = [item.check for _, item in mine if (item.expected in PAIRWISE_RELATIONS) != pairwise]
        if wrong:
            raise ValueError(f"controls {sorted(set(wrong))}: relations {', '.join(sorted(PAIRWISE_RELATIONS))} go with pairwise rubrics "
                             f"and only there; {rubric!r} is {'' if pairwise else 'not '}pairwise")
        if pairwise:
            results = _judge_pairs(backend, judge, rubric, [item for _, item in mine], progress)
            judged.update({index: ControlJudgment(item, result) for (index, item), result in zip(mine, results, strict=True)})
            continue
        inputs = [item.inputs for _, item in mine] + [item.reference for _, item in mine if item.reference is not None]
        by_key = _judge_unique(backend, judge, rubric, inputs, progress)
        for index, item in mine:
            reference = by_key[stable_hash(json_form(item.reference))] if item.reference is not None else None
            judged[index] = ControlJudgment(item, by_key[stable_hash(json_form(item.inputs))], reference)
    return [judged[index] for index in range(len(items))]


__all__ = [
    "DEFAULT_CONTROLS",
    "FILLER_FILE",
    "PADDED",
    "PADDING_SHARE",
    "PAIRWISE_RELATIONS",
    "REFERENCE_RELATIONS",
    "STATISTIC_OF",
    "THRESHOLDS_FILE",
    "CONTROL_TEXTS_FILE",
    "IDENTICAL",
    "REFUSAL",
    "REFUSAL_PAIR",
    "SHUFFLED",
    "CheckThresholds",
    "ControlItem",
    "ControlJudgment",
    "ControlSet",
    "JudgeChecks",
    "Relation",
    "controls_for",
    "judge_controls",
    "filler_sentences",
    "load_thresholds",
    "padded_text",
    "pick_other",
    "refusal_text",
    "sample_ids",
    "shuffled_sentences",
]
