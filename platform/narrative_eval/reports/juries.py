"""Weighted juries in a sweep's report: a jury whose members are weighted by their control checks is combined after
the checks, from the verdicts its members logged in the cells.

A weighted jury (`juries: [{..., aggregate: weighted}]`) cannot be combined in a cell: its weights come from its
members' control checks, which the sweep judges after its cells. The sweep logs each such jury's weights on its
parent run once the checks are done (`sweep.log_jury_weights`: `stats.judge_reliability.jury_weights`, the artifact
`JURY_WEIGHTS_ARTIFACT`, the metrics `jury/<id>/weight/<member>`); the report reads them and combines the members'
scores its rows hold (single-turn generations rows, multi-turn final rows: `judge/<member>/<dimension>`) output by
output (`stats.judge_reliability.jury_scores`, weighted; a member that failed on an output is left out there and the
others' weights renormalised), into `weighted_juries.csv`: per jury, group and dimension, the mean score and the
outputs it rests on. No cell run holds a weighted jury's scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key, judge_prefix
from narrative_eval.reports.judge_checks import logged_payload
from narrative_eval.reports.tables import write_table
from narrative_eval.stats.judge_reliability import JURY_WEIGHTS_ARTIFACT, REPEAT_MEANS, jury_scores, member_weights

pd = lazy_module("pandas")

WEIGHTED_JURIES_NAME = "weighted_juries"
"""The file stem of the table (weighted_juries.csv, .md, .tex)."""

WEIGHTED_JURIES_TITLE = "Weighted juries: each jury's mean score per group, its members weighted by their control checks"

NOT_SCORES = ("status", "raw", "error", REPEAT_MEANS)
"""A judge's row columns that are not scores."""


def logged_weights(experiment: str, sweep: str, data_sha256: str | None = None) -> list[dict[str, Any]]:
    """The weighted juries the sweep's last run logged on its parent run, each {jury, members, discrimination,
    weights, error} ([] when none, or when they were weighed on other data than `data_sha256`)."""
    payload = logged_payload(experiment, sweep, JURY_WEIGHTS_ARTIFACT, data_sha256)
    return list(payload["juries"]) if payload is not None else []


def weighed_with_people(juries: Sequence[dict[str, Any]], agreement: Mapping[str, float]) -> list[dict[str, Any]]:
    """The logged weighted juries (`logged_weights`) with each member's weight also scaled by its agreement with
    people (`agreement`: judge -> its human_rho in this report's human tables), for each jury with a rated member.
    The sweep weighs its juries by their control checks alone, because people rate its outputs after it; the report,
    written again once they have, weighs them by both (`member_weights`). Such a jury carries the agreement it used
    as `human_agreement`; a jury with no rated member is returned as logged."""
    weighed = []
    for found in juries:
        rated = {member: float(agreement[member]) for member in found["members"] if member in agreement}
        if not rated:
            weighed.append(found)
            continue
        try:
            weights, error = member_weights(found["discrimination"], rated), ""
        except ValueError as problem:
            weights, error = None, str(problem)
        weighed.append({**found, "weights": weights, "error": error, "human_agreement": rated})
    return weighed


def _dimensions(rows: Any, members: Sequence[str]) -> list[str]:
    """The score columns every member has in `rows` (`judge/<member>/<dimension>`), in the first member's order."""
    def scored(member: str) -> list[str]:
        prefix = judge_prefix(member)
        return [str(column)[len(prefix):] for column in rows.columns if str(column).startswith(prefix)
                and str(column)[len(prefix):] not in NOT_SCORES and not str(column).endswith(f"_{REPEAT_MEANS}")
                and pd.to_numeric(rows[column], errors="coerce").notna().any()]
    common = set.intersection(*(set(scored(member)) for member in members))
    return [dimension for dimension in scored(members[0]) if dimension in common]


def weighted_jury_frame(rows: Any, juries: Sequence[dict[str, Any]], groups: Sequence[str]) -> Any:
    """Per weighted jury (`logged_weights`), group (`groups` columns of `rows`) and dimension: the jury's mean score
    over the outputs of the group and how many it rests on, beside the weights it used (one row with the reason and
    no score for a jury none of whose members discriminates above chance)."""
    columns = ["jury", "weights", *groups, "dimension", "n", "score"]
    table = []
    for found in juries:
        weights = found["weights"]
        if not weights:
            table.append({"jury": found["jury"], "weights": found["error"]})
            continue
        label = ", ".join(f"{member} {weight:.3f}" for member, weight in weights.items())
        if found.get("human_agreement"):
            label += " (control checks x agreement with people)"
        members = list(found["members"])
        for dimension in _dimensions(rows, members):
            scores = pd.DataFrame({member: pd.to_numeric(rows[judge_key(member, dimension)], errors="coerce").to_numpy()
                                   for member in members})
            combined, _ = jury_scores(scores, "weighted", weights)
            frame = rows[list(groups)].reset_index(drop=True).assign(score=combined.to_numpy())
            for keys, part in frame.groupby(list(groups), sort=True):
                keys = keys if isinstance(keys, tuple) else (keys,)
                table.append({"jury": found["jury"], "weights": label, **dict(zip(groups, keys, strict=True)),
                              "dimension": dimension, "n": int(part["score"].notna().sum()),
                              "score": float(part["score"].mean())})
    return pd.DataFrame(table, columns=columns)


def write_weighted_juries(rows: Any, juries: Sequence[dict[str, Any]], groups: Sequence[str], out_dir: str | Path,
                          rubrics: tuple[str, ...] = ()) -> dict[str, str]:
    """weighted_juries.csv (`weighted_jury_frame`) in out_dir, its dimensions as `rubrics` name them: title ->
    markdown ({} without weighted juries)."""
    if not juries or rows is None or rows.empty:
        return {}
    return {WEIGHTED_JURIES_TITLE: write_table(weighted_jury_frame(rows, juries, groups), Path(out_dir),
                                               WEIGHTED_JURIES_NAME, rubrics)}


__all__ = ["NOT_SCORES", "WEIGHTED_JURIES_NAME", "WEIGHTED_JURIES_TITLE", "logged_weights", "weighed_with_people",
           "weighted_jury_frame", "write_weighted_juries"]
