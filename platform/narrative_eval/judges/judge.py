"""Running judges: batched, structured, validated, retried, and failures recorded — never scored.

`judge_many` renders blinded prompts, sends them in batches with the rubric's JSON schema
(constrained decoding where the backend supports it), validates every reply, and retries
the ones that fail with seed = judge.seed + attempt, so a retry is a new request and is
never served the same cached reply; a greedy judge on an engine that repeats greedy replies
(`Backend.repeats_greedy`, llama.cpp) is not retried. Items that never validate come back as
JudgeResult(ok=False) with every raw reply and the last validation error.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from narrative_eval.backends.base import Conversation
from narrative_eval.judges.render import Requirement, normalize_requirements, render_item
from narrative_eval.judges.rubric import Rubric, answer_schema, load_rubric
from narrative_eval.judges.validate import JudgeReplyError, expected_scores, parse_reply
from narrative_eval.records import GenerationParams, JudgeResult, JudgeSpec, Reply, derived_seed, stable_hash
from narrative_eval.records.keys import expected_name

HIGH_QUALITY_THRESHOLD = 4.0
"""An output is high-quality when its QAvg (mean over the rubric's dimensions) is strictly above this."""

EXPECTED_TOP_LOGPROBS = 20
"""Alternatives per token a judge with `scoring: expected` asks for (OpenAI's most): every score of a 1-5 or 1-10
scale whose probability is not negligible is among them."""


class GeneratingBackend(Protocol):
    """Anything that turns conversations into replies: a Backend or a CachedBackend."""

    batch_size: int
    """Requests it takes in one `generate` call (callers cut their requests into batches of this size)."""

    def generate(self, conversations: Sequence[Conversation], params: GenerationParams) -> list[Reply]: ...


def judge_params(judge: JudgeSpec, schema: dict[str, Any] | None, attempt: int) -> GenerationParams:
    """Sampling settings of one judging attempt: the judge's temperature, its seed moved on per attempt."""
    return GenerationParams(
        temperature=judge.temperature,
        seed=judge.seed + attempt,
        max_new_tokens=judge.max_new_tokens,
        json_schema=schema,
        top_logprobs=EXPECTED_TOP_LOGPROBS if judge.scoring == "expected" else 0,
    )


def reply_expected_scores(judge: JudgeSpec, rubric: Rubric, reply: Reply) -> dict[str, float | None]:
    """The probability-weighted scores of a validated reply, for a judge with `scoring: expected` under a scores
    rubric ({} otherwise: checklists and pairwise verdicts have no score digit to weigh)."""
    if judge.scoring != "expected" or rubric.kind != "scores":
        return {}
    if reply.logprobs is None:
        raise ValueError(f"judge {judge.id!r} asks for scoring: expected, but its backend replied without token "
                         "log-probabilities")
    return expected_scores(rubric, reply.logprobs)


def _requirement_ids(rubric: Rubric, item: Mapping) -> list[str]:
    if not rubric.per_requirement:
        return []
    return [r.id for r in normalize_requirements(item["requirements"])]


def judge_many(backend: GeneratingBackend, judge: JudgeSpec, rubric: str, items: Sequence[Mapping]) -> list[JudgeResult]:
    """Judge every item under one rubric; one JudgeResult per item, in order.

    Items carry the rubric's inputs (e.g. {problem, candidate}); other fields are ignored and
    never reach the judge. Attempts are batched: each round sends every still-failing item,
    grouped by answer schema (checklists differ per task).
    """
    spec = getattr(backend, "spec", None)
    if spec is not None and spec != judge.model:
        raise ValueError(f"judge {judge.id!r} is configured with model {judge.model.id!r}, but the backend runs {spec.id!r}")
    loaded = load_rubric(rubric)
    conversations = [render_item(loaded, item) for item in items]
    requirement_ids = [_requirement_ids(loaded, item) for item in items]
    schemas = [answer_schema(loaded, ids) for ids in requirement_ids]

    raw: list[list[str]] = [[] for _ in items]
    errors: list[str | None] = [None] * len(items)
    done: dict[int, tuple[dict, dict]] = {}
    expected: dict[int, dict[str, float | None]] = {}
    pending = list(range(len(items)))
    # A greedy judge on an engine that repeats greedy replies would only get the failed reply again.
    repeats = judge.temperature == 0 and getattr(backend, "repeats_greedy", False)
    not_retried = " (not retried: a greedy reply of this engine repeats)" if repeats and judge.max_retries else ""
    for attempt in range(1 if repeats else judge.max_retries + 1):
        if not pending:
            break
        groups: dict[str, list[int]] = defaultdict(list)
        for index in pending:
            groups[stable_hash(schemas[index])].append(index)
        for indices in groups.values():
            params = judge_params(judge, schemas[indices[0]], attempt)
            replies = backend.generate([conversations[i] for i in indices], params)
            for index, reply in zip(indices, replies, strict=True):
                raw[index].append(reply.text)
                if reply.error is not None:
                    errors[index] = f"attempt {attempt + 1}: request failed: {reply.error}"
                    continue
                try:
                    done[index] = parse_reply(loaded, reply.text, requirement_ids[index])
                    expected[index] = reply_expected_scores(judge, loaded, reply)
                except JudgeReplyError as error:
                    truncated = " (reply hit the token limit)" if reply.finish_reason == "length" else ""
                    errors[index] = f"attempt {attempt + 1}: {error}{truncated}{not_retried}"
        pending = [i for i in pending if i not in done]

    results = []
    for index in range(len(items)):
        common = dict(judge_id=judge.id, rubric=loaded.name, rubric_hash=loaded.hash, attempts=len(raw[index]))
        if index in done:
            scores, details = done[index]
            results.append(JudgeResult(ok=True, scores=scores, details=details, raw_replies=raw[index],
                                       expected_scores=expected[index], **common))
        else:
            results.append(JudgeResult(ok=False, raw_replies=raw[index], error=errors[index], **common))
    return results


# --------------------------------------------------------------------------- pairwise, both orders


def judge_pairwise_orders(
    backend: GeneratingBackend, judge: JudgeSpec, items: Sequence[Mapping], rubric: str
) -> list[tuple[JudgeResult, JudgeResult]]:
    """Each pair judged in both presentation orders under a pairwise rubric: (forward, reversed) per item, the
    reversed one showing response_b as A. Items are {task, requirements, response_a, response_b}; each result is
    in the order it was shown (its verdicts not restored)."""
    forward = [
        {"task": it["task"], "requirements": it["requirements"], "response_a": it["response_a"], "response_b": it["response_b"]}
        for it in items
    ]
    reversed_ = [{**f, "response_a": f["response_b"], "response_b": f["response_a"]} for f in forward]
    both = judge_many(backend, judge, rubric, forward + reversed_)
    return list(zip(both[: len(items)], both[len(items) :], strict=True))


def judge_pairwise(
    backend: GeneratingBackend, judge: JudgeSpec, items: Sequence[Mapping], rubric: str
) -> list[JudgeResult]:
    """Pairwise preference judged in both presentation orders; items are {task, requirements, response_a, response_b}.

    Scores are signed preferences for response_a (+2 A clearly better ... -2 B clearly better),
    averaged over the forward order and the order-restored reversed one. details holds both
    verdicts and, per dimension, whether the two orders agree in direction.
    """
    return [combine_orders(first, second) for first, second in judge_pairwise_orders(backend, judge, items, rubric)]


FORWARD, REVERSED = "forward", "reversed"
"""The two presentation orders of a pairwise judgment, as keys of its details: as given, and A and B swapped."""


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def repeat_judges(judge: JudgeSpec) -> list[JudgeSpec]:
    """The judge of each repeat (`JudgeSpec.repeats`): the first is the judge itself, so its requests are those of a
    judge that judges once (a rerun with more repeats sends only the new ones); each other has a seed of its own."""
    return [judge] + [judge.model_copy(update={"seed": derived_seed(judge.seed, "judge repeat", index)})
                      for index in range(1, judge.repeats)]


def _mean_scores(scores: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    keys = list(dict.fromkeys(key for found in scores for key in found))
    means = {}
    for key in keys:
        values = [found[key] for found in scores if found.get(key) is not None]
        means[key] = statistics.fmean(values) if values else None
    return means


def _whole_verdict(value: float) -> float:
    """The whole verdict nearest `value`, an exact half toward zero: toward the weaker claim on every rubric's scale
    (no preference on a pairwise one, centred on tie; the lower score on a scores or a 0/1 checklist one)."""
    return float(_sign(value) * math.ceil(abs(value) - 0.5))


MAJORITY_VERSION = 2
"""The version of the majority rule (`majority_verdict`): the first took the mean of equally frequent scores, so a
cell whose jury combines by majority holds it in its spec's versions (`judges.jury.jury_versions`) and is made again
under this rule instead of being skipped."""


def majority_verdict(values: Sequence[float]) -> float:
    """The verdict most of `values` give (a jury's members', a pairwise judge's repeats), each read as the whole
    verdict nearest it first (`_whole_verdict`: a member's mean over its repeats is not a verdict). Where several are
    equally frequent, the median verdict of all of them, which at least half of them are at or above and at least half
    at or below (2, 4 and 5 give 4; B_clearly_better twice, A_slightly_better twice and A_clearly_better give
    A_slightly_better); an even split between two verdicts is settled toward the weaker claim (`_whole_verdict` of
    their middle): a requirement half the jury finds met is not met (1 and 0: 0), a preference needs a majority
    (A_slightly_better and B_slightly_better: tie; A_clearly_better and A_slightly_better: A_slightly_better), scores 3
    and 4 give 3."""
    if not values:
        raise ValueError("a majority needs at least one verdict")
    verdicts = [_whole_verdict(value) for value in values]
    counts = Counter(verdicts).most_common()
    if len(counts) == 1 or counts[0][1] > counts[1][1]:
        return counts[0][0]
    return _whole_verdict(statistics.median(verdicts))


def combine_scores(values: Sequence[float], aggregate: str) -> float:
    """Several scores of one dimension of one output (a jury's members') combined by `aggregate`: mean, median or
    majority (`majority_verdict`)."""
    if not values:
        raise ValueError("a jury combines at least one score")
    if aggregate == "mean":
        return statistics.fmean(values)
    if aggregate == "median":
        return float(statistics.median(values))
    if aggregate == "majority":
        return majority_verdict(values)
    raise ValueError(f"unknown jury aggregate {aggregate!r} (mean, median or majority)")


def _majority_verdicts(scores: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """A pairwise judge's repeats of one pair in one order, dimension by dimension: the verdict most repeats gave
    (`majority_verdict`), one the rubric allows."""
    keys = list(dict.fromkeys(key for found in scores for key in found))
    verdicts: dict[str, float | None] = {}
    for key in keys:
        values = [float(found[key]) for found in scores if found.get(key) is not None]
        verdicts[key] = majority_verdict(values) if values else None
    return verdicts


def combine_repeats(results: Sequence[JudgeResult], pairwise: bool = False) -> JudgeResult:
    """One verdict from the repeats of one output: the mean of the valid repeats' scores (and expected scores), or for
    a pairwise rubric (`pairwise`: one pair in one presentation order) the verdict most repeats gave
    (`_majority_verdicts`), a verdict the rubric allows; every repeat's scores kept in `repeats`; failed only when
    every repeat failed. A single result is returned as is."""
    if len(results) == 1:
        return results[0]
    valid = [result for result in results if result.ok]
    first = valid[0] if valid else results[0]
    update: dict[str, Any] = {
        "repeats": [dict(result.scores) if result.ok else None for result in results],
        "attempts": sum(result.attempts for result in results),
        "raw_replies": [reply for result in results for reply in result.raw_replies],
    }
    if valid:
        combine = _majority_verdicts if pairwise else _mean_scores
        update["scores"] = combine([result.scores for result in valid])
        weighted = [result.expected_scores for result in valid if result.expected_scores]
        if weighted:
            update["expected_scores"] = _mean_scores(weighted)
    return first.model_copy(update=update)


def combine_orders(first: JudgeResult, second: JudgeResult) -> JudgeResult:
    """One pairwise verdict from the forward and the reversed one: scores averaged with the reversed restored,
    both verdicts in details and, per dimension, whether they agree in direction; failed if either failed."""
    common = dict(
        judge_id=first.judge_id,
        rubric=first.rubric,
        rubric_hash=first.rubric_hash,
        attempts=first.attempts + second.attempts,
        raw_replies=first.raw_replies + second.raw_replies,
    )
    if not (first.ok and second.ok):
        problems = [f"{name} order: {r.error}" for name, r in ((FORWARD, first), (REVERSED, second)) if not r.ok]
        return JudgeResult(ok=False, error="; ".join(problems), **common)
    restored = {key: -value for key, value in second.scores.items()}
    scores = {key: (first.scores[key] + restored[key]) / 2 for key in first.scores}
    details = {
        FORWARD: first.details["verdicts"],
        REVERSED: second.details["verdicts"],
        "forward_scores": dict(first.scores),
        "restored_scores": restored,
        "consistent": {key: _sign(first.scores[key]) == _sign(restored[key]) for key in first.scores},
    }
    return JudgeResult(ok=True, scores=scores, details=details, **common)


# --------------------------------------------------------------------------- summaries


def qavg(scores: Mapping[str, float | None], dimensions: Sequence[str] | None = None) -> float:
    """QAvg: the mean of a rubric's dimensions (default: every score given); all of them must be present."""
    keys = tuple(dimensions) if dimensions is not None else tuple(scores)
    missing = [key for key in keys if scores.get(key) is None]
    if missing or not keys:
        raise KeyError(f"QAvg needs every dimension of the rubric; missing {missing or 'all'}")
    return sum(float(scores[key]) for key in keys) / len(keys)


def is_high_quality(scores: Mapping[str, float | None], dimensions: Sequence[str] | None = None) -> bool:
    """True when the output's QAvg is strictly above 4."""
    return qavg(scores, dimensions) > HIGH_QUALITY_THRESHOLD


def failure_rate(results: Sequence[JudgeResult]) -> float:
    """Share of judgments that never validated (NaN when there are none)."""
    if not results:
        return math.nan
    return sum(not r.ok for r in results) / len(results)


def pairwise_consistency(results: Sequence[JudgeResult], dimension: str | None = None) -> float:
    """Order-restored directional consistency: share of (pair, dimension) verdicts whose direction
    (A better / tie / B better) survives swapping the presentation order. Failed pairs are left out;
    NaN when nothing is left."""
    flags = []
    for result in results:
        if not result.ok:
            continue
        for key, consistent in result.details["consistent"].items():
            if dimension is None or key == dimension:
                flags.append(bool(consistent))
    return sum(flags) / len(flags) if flags else math.nan


def summarize(results: Sequence[JudgeResult]) -> dict[str, float]:
    """Per-judge metrics to log: mean of each dimension over valid judgments, failure rate, and
    for a scores rubric QAvg over its dimensions and High% (share of valid judgments with QAvg > 4,
    in percent), for pairwise the order consistency. All results must come from one judge and one rubric."""
    if not results:
        return {"failure_rate": math.nan, "n_judged": 0.0}
    judges = {(r.judge_id, r.rubric) for r in results}
    if len(judges) != 1:
        raise ValueError(f"summarize one judge and rubric at a time, got {sorted(judges)}")
    valid = [r for r in results if r.ok]
    metrics: dict[str, float] = {"failure_rate": failure_rate(results), "n_judged": float(len(results))}
    keys = list(dict.fromkeys(key for r in valid for key in r.scores))
    for key in keys:
        values = [r.scores[key] for r in valid if r.scores.get(key) is not None]
        metrics[key] = statistics.fmean(values) if values else math.nan
    rubric = load_rubric(results[0].rubric)
    if rubric.kind == "scores" and not any(d.nullable for d in rubric.dimensions):
        per_item = [qavg(r.scores, rubric.keys) for r in valid]
        metrics["qavg"] = statistics.fmean(per_item) if per_item else math.nan
        metrics["high_pct"] = 100 * sum(q > HIGH_QUALITY_THRESHOLD for q in per_item) / len(per_item) if per_item else math.nan
    weighted = [r.expected_scores for r in valid if r.expected_scores]
    for key in list(dict.fromkeys(key for scores in weighted for key in scores)):
        values = [scores[key] for scores in weighted if scores.get(key) is not None]
        metrics[expected_name(key)] = statistics.fmean(values) if values else math.nan
    if weighted and rubric.kind == "scores" and not any(d.nullable for d in rubric.dimensions):
        readable = [scores for scores in weighted if all(scores.get(key) is not None for key in rubric.keys)]
        metrics[expected_name("qavg")] = statistics.fmean(qavg(s, rubric.keys) for s in readable) if readable else math.nan
    if rubric.kind == "pairwise" and valid and "consistent" in valid[0].details:
        metrics["order_consistency"] = pairwise_consistency(valid)
        for key in valid[0].details["consistent"]:
            metrics[f"{key}_order_consistency"] = pairwise_consistency(valid, key)
    return metrics


__all__ = [
    "Requirement",
    "combine_orders",
    "combine_repeats",
    "combine_scores",
    "failure_rate",
    "is_high_quality",
    "judge_many",
    "judge_pairwise",
    "repeat_judges",
    "judge_pairwise_orders",
    "judge_params",
    "majority_verdict",
    "MAJORITY_VERSION",
    "reply_expected_scores",
    "pairwise_consistency",
    "qavg",
    "summarize",
]
