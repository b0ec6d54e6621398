"""Statistics and verdicts of the judge control checks (judges.checks): one row per judge x rubric x check.

- discrimination (below_reference, a_preferred): the share of items whose known-good side beats the control in
  the judge's average (QAvg over the dimensions given, adherence, or the order-restored pairwise preference for
  A), ties counting half, with Wilson's score interval (items are distinct instances, so independent); and the
  mean gap in judge points (known-good minus control; pairwise: the preference in verdict points, -2..2) with a
  bootstrap interval over instances.
- adherence (near_zero): the mean judge average of the controls (checklist: adherence 0..1), bootstrap interval.
- tie_rate (tie): the share of tie verdicts over both orders and every dimension; the bootstrap resamples items,
  since the verdicts of one item are not independent.
- length_bias (padded_not_above, padded_not_preferred): the share of items whose padded output beats the output
  itself (ties half), Wilson's interval, and the mean gap in judge points (padded minus output), bootstrap interval.
- position_bias (every pairwise control of a rubric): the share of A-preferences among the non-tie verdicts as
  shown, both orders pooled; ratio bootstrap over items.

Items whose judgment never validated are left out of the statistics and counted in n_failed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from narrative_eval.judges.checks import (
    PAIRWISE_RELATIONS,
    STATISTIC_OF,
    CheckThresholds,
    ControlJudgment,
    load_thresholds,
)
from narrative_eval.lazy import lazy_module
from narrative_eval.records import JudgeResult
from narrative_eval.records.keys import with_interval
from narrative_eval.stats.bootstrap import ClusterBootstrap, percentile_interval

pd = lazy_module("pandas")

POSITION_BIAS_CHECK = "position_bias"
"""The check name of the row every pairwise rubric gets from all its control pairs."""

COLUMNS: tuple[str, ...] = ("judge", "rubric", "check", "statistic", "n", "n_failed", "value", "lo", "hi",
                            "threshold", "pass", *with_interval("gap"), "note")
"""The columns of judge_checks.csv, in order (docs/formats.md)."""

TAG_PREFIX = "judge_check/"
"""A judge's verdict, on a sweep's parent run and each of its cell runs: tag `judge_check/<judge>` with value `pass`
or `fail: <check>, <check>`; and its checks as metrics `judge_check/<judge>/<check>` on the parent run."""

PASS = "pass"
"""The tag value of a judge that passed every check."""

FAIL = "fail: "
"""The start of the tag value of a judge that failed checks (their names follow, comma-separated)."""

ROWS_ARTIFACT = "judge_checks/rows.json"
"""A sweep parent run's check rows ({data_sha256, rows}), which its reports read back."""
JUDGMENTS_ARTIFACT = "judge_checks/judgments.json"
"""A sweep parent run's control judgments, one record per judge and item (judges.checks.ControlJudgment.record)."""

NAN = math.nan


@dataclass(frozen=True)
class Estimate:
    """A check's statistic on the valid judgments."""

    value: float
    """The statistic (NaN when undefined)."""
    lo: float
    """Lower bound of its interval."""
    hi: float
    """Upper bound of its interval."""
    n: int
    """Control items it rests on."""
    gap: float = NAN
    """Discrimination: mean known-good minus control, in judge points."""
    gap_lo: float = NAN
    """Lower bound of the gap's bootstrap interval."""
    gap_hi: float = NAN
    """Upper bound of the gap's bootstrap interval."""


@dataclass(frozen=True)
class CheckRow:
    """One judge x rubric x check with its verdict: a row of judge_checks.csv."""

    judge: str
    """Judge id."""
    rubric: str
    """Rubric the controls were judged under."""
    check: str
    """Check name (mismatched_fill, refusal, identical_pair, position_bias, ...)."""
    statistic: str
    """discrimination, adherence, tie_rate or position_bias."""
    n: int
    """Control items with valid judgments the value rests on."""
    n_failed: int
    """Control items whose judgment never validated (left out)."""
    value: float
    """The statistic."""
    lo: float
    """Lower bound of its interval (level from the thresholds file)."""
    hi: float
    """Upper bound of its interval."""
    threshold: float
    """The threshold the value is held to (min or max, per statistic)."""
    passed: bool
    """The verdict."""
    gap: float
    """Discrimination: mean known-good minus control in judge points (NaN for other statistics)."""
    gap_lo: float
    """Lower bound of the gap's interval."""
    gap_hi: float
    """Upper bound of the gap's interval."""
    note: str
    """Why the check failed or the value is undefined ('' when it passed plainly)."""


def wilson_interval(successes: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a share of `successes` in `n` (successes may be fractional: ties count half)."""
    if n <= 0:
        return NAN, NAN
    z = NormalDist().inv_cdf(0.5 + level / 2)
    share = successes / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _bootstrap(clusters: Sequence[str], thresholds: CheckThresholds) -> ClusterBootstrap:
    return ClusterBootstrap(list(clusters), n_boot=thresholds.n_boot, seed=0)


def _mean_interval(values: Sequence[float], clusters: Sequence[str], thresholds: CheckThresholds) -> tuple[float, float, float]:
    if not values:
        return NAN, NAN, NAN
    lo, hi = percentile_interval(_bootstrap(clusters, thresholds).means(values), thresholds.level)
    return float(np.mean(values)), lo, hi


def judge_average(result: JudgeResult) -> float:
    """A verdict's judge average: of its probability-weighted scores where the judge reads them (`scoring:
    expected`, the dimensions it could read), else of its scores."""
    if result.expected_scores:
        values = [value for value in result.expected_scores.values() if value is not None]
        return float(np.mean(values)) if values else NAN
    return result.mean()


def margin(judgment: ControlJudgment) -> float:
    """How far the known-good side beats the control, in judge points: reference minus control average, or for a
    pairwise a_preferred item the order-restored preference for A (the mean over the rubric's dimensions)."""
    if judgment.item.expected in ("a_preferred", "padded_not_preferred"):
        return judgment.result.mean()
    return judge_average(judgment.reference) - judge_average(judgment.result)


def discrimination(judgments: Sequence[ControlJudgment], thresholds: CheckThresholds) -> Estimate:
    """Share of valid items whose known-good side wins (ties half) with Wilson's interval, and the mean gap."""
    valid = [j for j in judgments if j.ok]
    margins = [margin(j) for j in valid]
    wins = sum(1.0 if m > 0 else 0.5 if m == 0 else 0.0 for m in margins)
    lo, hi = wilson_interval(wins, len(valid), thresholds.level)
    gap, gap_lo, gap_hi = _mean_interval(margins, [j.item.instance_id for j in valid], thresholds)
    return Estimate(wins / len(valid) if valid else NAN, lo, hi, len(valid), gap, gap_lo, gap_hi)


def length_bias(judgments: Sequence[ControlJudgment], thresholds: CheckThresholds) -> Estimate:
    """Share of valid items whose padded output beats the output (ties half), with Wilson's interval, and the mean
    gap padded minus output: discrimination's share and gap seen from the padded side."""
    known_good = discrimination(judgments, thresholds)
    return Estimate(1 - known_good.value, 1 - known_good.hi, 1 - known_good.lo, known_good.n,
                    -known_good.gap, -known_good.gap_hi, -known_good.gap_lo)


def control_adherence(judgments: Sequence[ControlJudgment], thresholds: CheckThresholds) -> Estimate:
    """Mean judge average of the valid controls (checklist: adherence) with its bootstrap interval."""
    valid = [j for j in judgments if j.ok]
    value, lo, hi = _mean_interval([j.result.mean() for j in valid], [j.item.instance_id for j in valid], thresholds)
    return Estimate(value, lo, hi, len(valid))


def shown_verdicts(judgment: ControlJudgment) -> list[float]:
    """A pairwise judgment's signed preferences for the response shown as A, per order and dimension."""
    details = judgment.result.details
    forward = list(details["forward_scores"].values())
    reversed_as_shown = [-value for value in details["restored_scores"].values()]
    return forward + reversed_as_shown


def tie_rate(judgments: Sequence[ControlJudgment], thresholds: CheckThresholds) -> Estimate:
    """Share of tie verdicts (both orders, every dimension) over the valid items, bootstrap over items."""
    valid = [j for j in judgments if j.ok]
    flags = [(float(v == 0), j.item.instance_id) for j in valid for v in shown_verdicts(j)]
    value, lo, hi = _mean_interval([f for f, _ in flags], [c for _, c in flags], thresholds)
    return Estimate(value, lo, hi, len(valid))


def position_bias(judgments: Sequence[ControlJudgment], thresholds: CheckThresholds) -> Estimate:
    """Share of A-preferences among the non-tie verdicts as shown, both orders pooled; ratio bootstrap over items.
    NaN when every verdict is a tie."""
    valid = [j for j in judgments if j.ok]
    rows = [(float(v > 0), float(v != 0), j.item.instance_id) for j in valid for v in shown_verdicts(j)]
    preferred = sum(r[1] for r in rows)
    if not preferred:
        return Estimate(NAN, NAN, NAN, len(valid))
    replicates = _bootstrap([r[2] for r in rows], thresholds).ratio_of_means([r[0] for r in rows], [r[1] for r in rows])
    lo, hi = percentile_interval(replicates, thresholds.level)
    return Estimate(sum(r[0] for r in rows) / preferred, lo, hi, len(valid))


ESTIMATORS = {"discrimination": discrimination, "adherence": control_adherence, "tie_rate": tie_rate,
              "position_bias": position_bias, "length_bias": length_bias}
"""Statistic name -> its estimator."""


def threshold_of(statistic: str, thresholds: CheckThresholds) -> float:
    """The number a statistic is held to: discrimination and tie_rate a minimum, adherence, position_bias and
    length_bias a maximum (position bias also 1 - it as a minimum)."""
    return {"discrimination": thresholds.discrimination.min, "adherence": thresholds.adherence.max,
            "tie_rate": thresholds.tie_rate.min, "position_bias": thresholds.position_bias.max,
            "length_bias": thresholds.length_bias.max}[statistic]


def _judged(statistic: str, estimate: Estimate, thresholds: CheckThresholds) -> list[str]:
    """Why a defined statistic fails its threshold ([] when it passes)."""
    value, limit = estimate.value, threshold_of(statistic, thresholds)
    if statistic == "discrimination":
        chance = thresholds.discrimination.interval_excludes
        return ([f"below {limit}"] if value < limit else []) + (
            [f"interval reaches {chance}"] if not estimate.lo > chance else [])
    if statistic == "adherence":
        return [f"above {limit}"] if value > limit else []
    if statistic == "tie_rate":
        return [f"below {limit}"] if value < limit else []
    if statistic == "length_bias":
        even = thresholds.length_bias.interval_excludes
        return ([f"above {limit}"] if value > limit else []) + (
            [f"interval above {even}: padding wins"] if estimate.lo > even else [])
    return [f"prefers {'A' if value > 0.5 else 'B'} beyond {limit}"] if max(value, 1 - value) > limit else []


def verdict(statistic: str, estimate: Estimate, n_failed: int, thresholds: CheckThresholds) -> tuple[bool, str]:
    """(passed, note) of one check: its statistic against the thresholds file, failing whatever the value when
    too many judgments never validated or none did."""
    total = estimate.n + n_failed
    if estimate.n == 0:
        return False, "no valid judgment" if total else "no control item"
    problems = []
    if n_failed / total > thresholds.failures.max_share:
        problems.append(f"{n_failed} of {total} judgments never validated (over {thresholds.failures.max_share})")
    if math.isnan(estimate.value):
        if statistic != "position_bias":
            return False, "; ".join([*problems, "undefined"])
        return not problems, "; ".join([*problems, "every verdict a tie: no side preferred"])
    problems.extend(_judged(statistic, estimate, thresholds))
    return not problems, "; ".join(problems)


def _row(judge_id: str, rubric: str, check: str, statistic: str, judgments: Sequence[ControlJudgment],
         thresholds: CheckThresholds) -> CheckRow:
    estimate = ESTIMATORS[statistic](judgments, thresholds)
    n_failed = sum(not j.ok for j in judgments)
    passed, note = verdict(statistic, estimate, n_failed, thresholds)
    return CheckRow(judge_id, rubric, check, statistic, estimate.n, n_failed, estimate.value, estimate.lo, estimate.hi,
                    threshold_of(statistic, thresholds), passed, estimate.gap, estimate.gap_lo, estimate.gap_hi, note)


def check_rows(judge_id: str, judgments: Sequence[ControlJudgment],
               thresholds: CheckThresholds | None = None) -> list[CheckRow]:
    """One judge's verdicts: a row per rubric x check in the order the checks first appear, and after each pairwise
    rubric's checks its position_bias row over all of that rubric's control pairs."""
    thresholds = thresholds or load_thresholds()
    groups: dict[tuple[str, str], list[ControlJudgment]] = {}
    for judgment in judgments:
        groups.setdefault((judgment.item.rubric, judgment.item.check), []).append(judgment)
    rows = []
    for (rubric, check), members in groups.items():
        relations = {j.item.expected for j in members}
        if len(relations) > 1:
            raise ValueError(f"check {check!r} of rubric {rubric!r} mixes relations {sorted(relations)}")
        rows.append(_row(judge_id, rubric, check, STATISTIC_OF[relations.pop()], members, thresholds))
        pairwise = [j for j in judgments if j.item.rubric == rubric and j.item.expected in PAIRWISE_RELATIONS]
        last_of_rubric = check == [c for r, c in groups if r == rubric][-1]
        if pairwise and last_of_rubric:
            rows.append(_row(judge_id, rubric, POSITION_BIAS_CHECK, "position_bias", pairwise, thresholds))
    return rows


def judge_checks_table(rows: Sequence[CheckRow]) -> pd.DataFrame:
    """The rows as judge_checks.csv's table (COLUMNS; `pass` as a boolean)."""
    records = [{("pass" if key == "passed" else key): value for key, value in asdict(row).items()} for row in rows]
    return pd.DataFrame(records, columns=list(COLUMNS))


def check_labels(rows: Sequence[CheckRow]) -> list[str]:
    """Each row's name in metrics and tags: its check, or `<rubric>/<check>` where one judge has that check under
    several rubrics (the identical pairs and position bias of two pairwise rubrics)."""
    counts = Counter((row.judge, row.check) for row in rows)
    return [row.check if counts[(row.judge, row.check)] == 1 else f"{row.rubric}/{row.check}" for row in rows]


def failing_judges(rows: Sequence[CheckRow]) -> dict[str, list[str]]:
    """Judge -> the labels of its failed checks, in table order (judges that passed every check left out)."""
    failing: dict[str, list[str]] = {}
    for row, label in zip(rows, check_labels(rows), strict=True):
        if not row.passed:
            failing.setdefault(row.judge, []).append(label)
    return failing


def failed_checks_warning(judge: str, named_checks: Sequence[str]) -> str:
    """The one warning about a judge that failed its control checks (`named_checks`: as readers see them), wherever
    its scores appear: a report's notes, every tab of the app (reports.judge_checks.judge_warning) and the MLflow
    records of its scores (a run's description, its traces' judge assessments)."""
    # One order wherever it is said (the checks come from tags, a report's table or several runs in their own orders).
    named = ", ".join(sorted(set(named_checks), key=str.lower)) or "an unnamed check"
    return (f"⚠ judge {judge} failed checks: {named}: it may not tell good outputs from bad ones, so read its scores "
            "with care")


def verdict_tags(rows: Sequence[CheckRow]) -> dict[str, str]:
    """`judge_check/<judge>` -> `pass`, or `fail: <check>, <check>` naming its failed checks, for every judge checked."""
    failing = failing_judges(rows)
    return {f"{TAG_PREFIX}{judge}": f"{FAIL}{', '.join(failing[judge])}" if judge in failing else PASS
            for judge in dict.fromkeys(row.judge for row in rows)}


def failed_in_tags(tags: Mapping[str, Any]) -> dict[str, list[str]]:
    """judge -> the checks it failed, read back from a run's tags as `verdict_tags` wrote them (judges that passed,
    or were not checked, are absent)."""
    failed = {}
    for key, value in tags.items():
        if isinstance(key, str) and key.startswith(TAG_PREFIX) and isinstance(value, str) and value.startswith(FAIL):
            failed[key[len(TAG_PREFIX):]] = [c.strip() for c in value[len(FAIL):].split(",") if c.strip()]
    return failed


def check_metrics(rows: Sequence[CheckRow]) -> dict[str, float]:
    """`judge_check/<judge>/<check>` -> the value, with `_lo` and `_hi` (its interval) and `_pass` (1 or 0) beside it."""
    metrics: dict[str, float] = {}
    for row, label in zip(rows, check_labels(rows), strict=True):
        name = f"{TAG_PREFIX}{row.judge}/{label}"
        metrics.update({**dict(zip(with_interval(name), (row.value, row.lo, row.hi), strict=True)),
                        f"{name}_pass": float(row.passed)})
    return metrics


def rows_from_records(records: Sequence[dict]) -> list[CheckRow]:
    """CheckRows from their dict form (dataclasses.asdict), as a sweep's parent run keeps them."""
    return [CheckRow(**record) for record in records]


__all__ = [
    "COLUMNS",
    "ESTIMATORS",
    "JUDGMENTS_ARTIFACT",
    "PASS",
    "POSITION_BIAS_CHECK",
    "ROWS_ARTIFACT",
    "TAG_PREFIX",
    "CheckRow",
    "Estimate",
    "check_labels",
    "check_metrics",
    "check_rows",
    "control_adherence",
    "discrimination",
    "failed_checks_warning",
    "failing_judges",
    "length_bias",
    "judge_checks_table",
    "margin",
    "position_bias",
    "rows_from_records",
    "shown_verdicts",
    "threshold_of",
    "tie_rate",
    "verdict",
    "verdict_tags",
    "failed_in_tags",
    "wilson_interval",
]
