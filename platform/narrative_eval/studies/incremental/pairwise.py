"""Pairwise judges of the incremental-delivery study (its Table 11 and appendix B.3), run at the end of a sweep.

FULL and SHARDED are separate cell runs, so pairs exist only once both cells of a model have finished: the
study's summarise step runs this when the sweep config lists rubrics under `pairwise_judges:`. A pair is one
story, model (and system prompt) and seed whose FULL and SHARDED final replies both have a score record under
some panel judge; every panel judge runs every listed rubric on it in both presentation orders (primary: FULL
shown as A). Judges see what the other judges see: the brief, its requirements and the two stories.

What is written (the human-validation formats of stats.human_records), to the sweep's parent run under
pairwise/<first 12 hex digits of the tasks file's sha256>/ and to the report folder's pairwise/:

- verdicts.jsonl: one line per case, rater and order; rater = '<judge id>/<rubric>';
- cases.jsonl: case_id '<model>/<story_id>/seed<k>', record_a = the FULL score record, record_b = the SHARDED
  one (of the first panel judge that scored both);
- evidence.jsonl: what an evidence-first judge recorded before its verdicts, one line per requirement status;
- judgments.json: every judgment (failures with their raw replies and error) and a digest of what was judged.

A rerun reuses every valid judgment whose digest (texts, rubric file, judge settings) is unchanged and judges the
rest; what an earlier attempt sent comes back from the request cache.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narrative_eval import tracking
from narrative_eval.errors import UserError
from narrative_eval.judges import load_rubric
from narrative_eval.judges.resumable import JudgedItem, Judgment, judge_items
from narrative_eval.lazy import lazy_module
from narrative_eval.multi_turn import Conversation
from narrative_eval.records import CellSpec, JudgeSpec, stable_hash
from narrative_eval.records.keys import seeded
from narrative_eval.stats.judge_reliability import flip_rate
from narrative_eval.reports.tables import write_table
from narrative_eval.studies.incremental.cell_tasks import select_tasks, tasks_of_cell
from narrative_eval.studies.incremental.config import IncrementalConfig
from narrative_eval.studies.incremental.human_records import (
    EvidenceStatus,
    PairCase,
    PairwiseVerdict,
    load_pairwise_evidence,
    load_pairwise_verdicts,
    save_pair_cases,
    save_pairwise_evidence,
    save_pairwise_verdicts,
)
from narrative_eval.studies.incremental.human_stats import order_consistency, status_stability, win_rates
from narrative_eval.studies.incremental.pairwise_files import ARTIFACT_DIR, FILES, JUDGMENTS_FILE, artifact_dir, logged_files
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.score_records import model_label, record_id
from narrative_eval.studies.incremental.vocabulary import (
    NAME,
    ORDERS,
    PAIR_CONDITIONS,
    PAIRWISE_DIMENSIONS,
    SCORE_LEVEL,
    shown_as,
)
from narrative_eval.study import experiment_of

log = logging.getLogger(__name__)
pd = lazy_module("pandas")


@dataclass(frozen=True)
class Pair:
    """A FULL/SHARDED pair of final replies to one story by one model and seed, both with a score record."""

    case: PairCase
    """The case: its id and the two score records, FULL first."""
    item: dict[str, Any]
    """What a judge sees in the primary order: {task, requirements, response_a (FULL), response_b (SHARDED)}."""


def rater_id(judge_id: str, rubric: str) -> str:
    """The rater a pairwise judgment is filed under: one judge under one rubric."""
    return f"{judge_id}/{rubric}"


# --------------------------------------------------------------------------- the pairs of a sweep


def _cell_outputs(run_id: str) -> tuple[CellSpec, dict[str, WritingTask], dict[tuple[str, int], str], set[str]]:
    """A finished cell's spec, tasks, final reply per (story_id, seed) and score-record ids."""
    cell = CellSpec.model_validate(tracking.load_json_artifact(run_id, "cell_spec.json"))
    try:
        tasks = {task.story_id: task for task in tasks_of_cell(cell)}
    except ValueError as error:
        raise UserError(f"pairwise judges: the tasks of cell {cell.run_name} (run {run_id}): {error}") from None
    finals = {(a["story_id"], a["seed"]): Conversation.from_logged(a, "story_id").final_text
              for a in tracking.load_json_artifact(run_id, "trajectories.json") if a["kept"]}
    records = {r["record_id"] for r in tracking.load_json_artifact(run_id, "score_records.json")}
    return cell, tasks, finals, records


def _model_pairs(full_run: str, sharded_run: str) -> list[Pair]:
    """The pairs of one model's FULL and SHARDED cells."""
    full, tasks, full_finals, full_records = _cell_outputs(full_run)
    sharded, _, sharded_finals, sharded_records = _cell_outputs(sharded_run)
    pairs = []
    for story_id, seed in sorted(set(full_finals) & set(sharded_finals)):
        # The first panel judge that scored both responses; with none there is no score record for a case to name.
        candidates = [(record_id(full, story_id, seed, judge.id), record_id(sharded, story_id, seed, judge.id))
                      for judge in full.judges]
        ids = next(((a, b) for a, b in candidates if a in full_records and b in sharded_records), None)
        if ids is None:
            continue
        task = tasks[story_id]
        case = PairCase(seeded(f"{model_label(full)}/{story_id}", seed), *ids)
        item = {"task": task.full_instruction, "requirements": list(task.constraints),
                "response_a": full_finals[(story_id, seed)], "response_b": sharded_finals[(story_id, seed)]}
        pairs.append(Pair(case, item))
    return pairs


def sweep_pairs(sweep: str, data_sha256: str | None = None) -> tuple[str, list[Pair]]:
    """The tasks file's sha256 the sweep's cells ran on, and every FULL/SHARDED pair of its finished cells."""
    runs = tracking.report_cell_runs(experiment_of(NAME), sweep, data_sha256)
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for _, run in runs.iterrows():  # newest first: a cell run again under a new spec replaces the older one
        cells.setdefault((run["params.model_id"], run["params.prompt_setting"]), {}).setdefault(
            run["params.condition"], run["run_id"])
    pairs = []
    for key in sorted(cells):
        if set(PAIR_CONDITIONS) <= set(cells[key]):
            pairs.extend(_model_pairs(*(cells[key][condition] for condition in PAIR_CONDITIONS)))
    return data_sha256 or str(runs["params.data_sha256"].iloc[0]), pairs


def count_pairs(cells: Sequence[CellSpec]) -> int:
    """How many pairs a grid can give, before any is generated: a story and seed of each FULL cell whose SHARDED
    twin (same model and system prompt) is in the grid."""
    shown_as_a, shown_as_b = PAIR_CONDITIONS
    twins = {(cell.model.id, cell.prompt_setting) for cell in cells if cell.condition == shown_as_b}
    return sum(len(select_tasks(cell)) * len(cell.seeds) for cell in cells
               if cell.condition == shown_as_a and (cell.model.id, cell.prompt_setting) in twins)


def sample_pairs(pairs: Sequence[Pair], size: int | None) -> list[Pair]:
    """`size` of the pairs (all when None or when there are fewer), in their order: those whose case ids hash
    lowest, so every run draws the same cases and a case stays drawn when other models join the sweep."""
    if size is None or len(pairs) <= size:
        return list(pairs)
    chosen = set(sorted((stable_hash(pair.case.case_id), pair.case.case_id) for pair in pairs)[:size])
    return [pair for pair in pairs if (stable_hash(pair.case.case_id), pair.case.case_id) in chosen]


# --------------------------------------------------------------------------- judging, resumable


def _judge_rubric(judge: JudgeSpec, entry: Any, pairs: Sequence[Pair], state: dict[tuple, dict],
                  backend_for: Callable[[Any], Any], publish: Callable[[], None]) -> int:
    """One judge under one pairwise rubric on every pair whose two valid judgments `state` does not already hold
    (same digest); updates `state`, publishing after each batch. Returns the pairs judged now."""
    spec = entry.judge_spec(judge)
    rater = rater_id(judge.id, load_rubric(entry.rubric).name)
    valid = {(case_id, order): row["digest"] for (case_id, held_by, order), row in state.items()
             if held_by == rater and row["ok"]}

    def keep(judged: list[Judgment]) -> None:
        for judgment in judged:
            state[(judgment.key, rater, judgment.order)] = {
                "case_id": judgment.key, "rater": rater, "order": judgment.order, "digest": judgment.digest,
                **judgment.result.model_dump(mode="json")}
        publish()

    made = judge_items(lambda: backend_for(spec.model), spec, entry.rubric,
                       [JudgedItem(pair.case.case_id, pair.item) for pair in pairs], valid, ORDERS, keep)
    return len({judgment.key for judgment in made})


FLIP_COLUMNS = ["judge", "dimension", "repeats", "n_judgments", "flip_rate"]
"""The flip-rate table: per rater and dimension, the repeats, the pair judgments (case x order) with two valid repeats
or more, and the share of their repeat pairs whose preferred side differs."""


def flip_rates(rows: Sequence[dict]) -> Any:
    """Each repeating rater's agreement with itself across repeats (`stats.judge_reliability.flip_rate`), dimension by
    dimension, from judgment rows (each a case, rater and order, with its repeats' verdicts in `repeats`); empty when
    no rater repeated."""
    table = []
    for rater in sorted({row["rater"] for row in rows}):
        repeated = [row["repeats"] for row in rows if row["rater"] == rater and len(row.get("repeats") or []) > 1]
        if not repeated:
            continue
        width = max(len(repeats) for repeats in repeated)
        for dimension in PAIRWISE_DIMENSIONS:
            matrix = [[math.nan if index >= len(repeats) or repeats[index] is None
                       or repeats[index].get(dimension) is None else float(repeats[index][dimension])
                       for index in range(width)] for repeats in repeated]
            judged = sum(sum(not math.isnan(value) for value in line) > 1 for line in matrix)
            table.append({"judge": rater, "dimension": dimension, "repeats": width, "n_judgments": judged,
                          "flip_rate": flip_rate(matrix)})
    return pd.DataFrame(table, columns=FLIP_COLUMNS)


def _verdict(row: dict) -> PairwiseVerdict:
    """A valid judgment as a verdict line: the rubric's signed preference as one of the five levels."""
    return PairwiseVerdict(row["case_id"], row["rater"], row["order"],
                           {d: SCORE_LEVEL[int(row["scores"][d])] for d in PAIRWISE_DIMENSIONS})


def _evidence(row: dict, case: PairCase) -> list[EvidenceStatus]:
    """The requirement statuses of a valid evidence-first judgment, each named by the response it is about."""
    shown = shown_as(row["order"], case.record_a, case.record_b)
    return [EvidenceStatus(row["case_id"], row["rater"], row["order"], side, shown[side], e["constraint_id"],
                           e["status"], e["quote"])
            for side, entries in row["details"].get("evidence", {}).items() for e in entries]


def write_pairwise_files(rows: Sequence[dict], cases: Sequence[PairCase], folder: Path) -> dict[str, Path]:
    """verdicts.jsonl, cases.jsonl, evidence.jsonl and judgments.json from judgment rows, in case, rater and
    order order; report input name -> path."""
    by_case = {case.case_id: case for case in cases}
    valid = [row for row in sorted(rows, key=lambda r: (r["case_id"], r["rater"], ORDERS.index(r["order"])))
             if row["ok"]]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / JUDGMENTS_FILE).write_text(json.dumps(list(rows), ensure_ascii=False, indent=1), encoding="utf-8")
    return {
        "pairwise": save_pairwise_verdicts([_verdict(row) for row in valid], folder / FILES["pairwise"]),
        "cases": save_pair_cases(cases, folder / FILES["cases"]),
        "evidence": save_pairwise_evidence([e for row in valid for e in _evidence(row, by_case[row["case_id"]])],
                                           folder / FILES["evidence"]),
    }


# --------------------------------------------------------------------------- the sweep's step


def _previous(parent: str, folder: str) -> dict[tuple, dict]:
    """The judgments an earlier invocation logged, by (case_id, rater, order)."""
    if JUDGMENTS_FILE not in logged_files(parent, folder):
        return {}
    rows = tracking.load_json_artifact(parent, f"{folder}/{JUDGMENTS_FILE}")
    return {(row["case_id"], row["rater"], row["order"]): row for row in rows}


def run_pairwise_judges(config: Any, out_dir: str | Path, backend_for: Callable[[Any], Any],
                        data_sha256: str | None = None) -> dict[str, str]:
    """Judge the FULL/SHARDED pairs of the sweep of `config` (its SweepConfig) with every panel judge under every
    rubric of its `pairwise_judges`, resuming what an earlier invocation judged; log the files and metrics on its
    parent run and write the order-consistency and status-stability tables to out_dir. Title -> markdown; {} when
    none are asked for. `backend_for` serves a judge's model (the sweep's backends behind its request cache)."""
    section: IncrementalConfig = config.section
    sweep, judges, entries = config.sweep, list(config.judges), list(section.pairwise_judges)
    parent = tracking.find_sweep_run(experiment_of(NAME), sweep)
    if parent is None or not entries:
        return {}
    data_sha256, pairs = sweep_pairs(sweep, data_sha256)
    pairs = sample_pairs(pairs, section.pairwise_sample)
    folder = artifact_dir(data_sha256)
    raters = {rater_id(judge.id, entry.rubric) for judge in judges for entry in entries}
    case_ids = {pair.case.case_id for pair in pairs}
    # Judgments of cases or raters the sweep no longer has are dropped: the files describe the current config.
    state = {key: row for key, row in _previous(parent, folder).items() if key[0] in case_ids and key[1] in raters}
    local = Path(out_dir) / ARTIFACT_DIR

    def publish() -> dict[str, Path]:
        written = write_pairwise_files(list(state.values()), [pair.case for pair in pairs], local)
        tracking.client().log_artifacts(parent, str(local), folder)
        return written

    judged = sum(_judge_rubric(judge, entry, pairs, state, backend_for, publish) for judge in judges for entry in entries)
    files = publish()
    log.info("pairwise judges of %s: %d pair judgments made now, %d reused", sweep, judged,
             len(pairs) * len(raters) - judged)
    counts = {"pairwise/n_cases": len(pairs), "pairwise/judged": judged,
              "pairwise/reused": len(pairs) * len(raters) - judged}
    words = {pair.case.case_id: (len(str(pair.item["response_a"]).split()), len(str(pair.item["response_b"]).split()))
             for pair in pairs}
    return _summaries(parent, files, list(state.values()), Path(out_dir), counts, words)


FLIP_TITLE = "Pairwise judges: flip rate across repeats (the share of a pair's repeat verdicts that disagree)"


def _summaries(parent: str, files: dict[str, Path], rows: list[dict], out_dir: Path,
               counts: dict[str, float], words: dict[str, tuple[int, int]]) -> dict[str, str]:
    """Order consistency, FULL's raw and length-controlled win rates with both sides' mean lengths (`words`: each
    case's FULL and SHARDED length in words) and status stability as tables in out_dir and, per rater, as metrics
    on the parent run (pairwise/<rater>/...) with each rater's failure rate (judgments that never validated, per
    order)."""
    verdicts = load_pairwise_verdicts(files["pairwise"])
    consistency = order_consistency(verdicts)
    wins = win_rates(verdicts, words)
    stability = status_stability(load_pairwise_evidence(files["evidence"]))
    metrics = dict(counts)
    for rater in sorted({row["rater"] for row in rows}):
        mine = [row for row in rows if row["rater"] == rater]
        metrics[f"pairwise/{rater}/failure_rate"] = sum(not row["ok"] for row in mine) / len(mine)
    for row in consistency.itertuples():
        metrics[f"pairwise/{row.judge}/order_consistency_{row.dimension}"] = row.order_restored_consistency
    for row in wins.itertuples():
        metrics[f"pairwise/{row.judge}/win_rate_{row.dimension}"] = row.win_rate
        metrics[f"pairwise/{row.judge}/lc_win_rate_{row.dimension}"] = row.lc_win_rate
    for row in stability.itertuples():
        metrics[f"pairwise/{row.judge}/status_stability"] = row.status_stability
    flips = flip_rates(rows)
    for row in flips.itertuples():
        metrics[f"pairwise/{row.judge}/flip_rate_{row.dimension}"] = row.flip_rate
    tracking.log_sweep_outputs(parent, {}, [], metrics=metrics)
    tables = {}
    if not consistency.empty:
        tables["Pairwise judges: order-restored consistency (appendix B.3)"] = write_table(
            consistency, out_dir, "pairwise_order_consistency")
    if not wins.empty:
        tables["Pairwise judges: FULL's win rate, raw and length-controlled, with both sides' lengths"] = write_table(
            wins, out_dir, "pairwise_win_rates")
    if not flips.empty:
        tables[FLIP_TITLE] = write_table(flips, out_dir, "pairwise_flip_rates")
    if not stability.empty:
        tables["Evidence-first pairwise judges: atomic status stability"] = write_table(
            stability, out_dir, "pairwise_status_stability")
    return tables


__all__ = ["FLIP_COLUMNS", "FLIP_TITLE", "Pair", "count_pairs", "flip_rates", "rater_id", "run_pairwise_judges", "sample_pairs", "sweep_pairs", "write_pairwise_files"]
