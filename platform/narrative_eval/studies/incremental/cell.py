"""One incremental-delivery cell: the same brief delivered FULL, SHARDED, or with replanning turns.

One cell = one model x system prompt x condition. For each seed, every task's conversation is
driven turn by turn (delivery.deliver); trajectories that hit the length/context limit are
regenerated with fresh seeds up to extra['max_regenerations'] times (default 1) and, if still
truncated, kept in the logs but not scored. extra['score_truncated'] = true opts in to scoring
replies cut by the token limit (the conversation then goes on past a cut turn); they stay
flagged in every table and are counted as 'scored_truncated_rate'. Each final reply is judged by every judge twice:
the requirement checklist (adherence) and the five writing-quality dimensions; a response with
both verdicts valid becomes one ScoreRecord (the published format).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from narrative_eval.evaluation import aggregate_seeds, in_batches, mean_or_nan
from narrative_eval.judges import rubric_hash
from narrative_eval.records import CellSpec, JudgeResult, Reply
from narrative_eval.records.keys import judge_key
from narrative_eval.studies.incremental.cell_tasks import select_tasks
from narrative_eval.studies.incremental.delivery import deliver, load_system_prompt
from narrative_eval.studies.incremental.effects import creative_integrity
from narrative_eval.studies.incremental.judging import judge_checklist, judge_quality
from narrative_eval.studies.incremental.records import ScoreRecord, Trajectory, WritingTask
from narrative_eval.studies.incremental.score_records import model_label, record_id
from narrative_eval.studies.incremental.turns import (
    DEFAULT_SYSTEM_PROMPTS_FILE,
    DEFAULT_TURNS_FILE,
    conversation_turns,
    load_turn_templates,
)
from narrative_eval.studies.incremental.vocabulary import CHECKLIST_RUBRIC, QUALITY_RUBRIC
from narrative_eval.studies.incremental.vocabulary import QUALITY_FIELDS
from narrative_eval.studies.incremental.vocabulary import SCORE_DIMENSIONS
from narrative_eval.study import CellResult, Runtime

DEFAULT_MAX_REGENERATIONS = 1
"""Fresh attempts given to a truncated trajectory before it is left unscored."""


def score_record(
    cell: CellSpec, task: WritingTask, seed: int, judge_id: str, checklist: JudgeResult, quality: JudgeResult
) -> ScoreRecord:
    """A ScoreRecord from one judge's two valid verdicts on one final reply."""
    return ScoreRecord(
        record_id=record_id(cell, task.story_id, seed, judge_id),
        story_id=task.story_id,
        genre=task.domain,
        model=model_label(cell),
        condition=cell.condition,
        judge=judge_id,
        adherence=[{"constraint_id": item["constraint_id"], "score": float(item["score"])} for item in checklist.details["items"]],
        quality={
            dim: (round(quality.scores[dim]) if quality.scores.get(dim) is not None else None) for dim in QUALITY_FIELDS
        },
    )


class SecondsCounter:
    """Sums engine seconds over every reply a delivery sees (cache hits keep their first timing)."""

    def __init__(self) -> None:
        self.total = 0.0
        """Seconds so far."""

    def __call__(self, story_id: str, turn: int, reply: Reply) -> None:
        self.total += reply.seconds


class DeliveryCell:
    """Running one incremental-delivery cell (the study's `run_cell`): delivery with regeneration, judging, score
    records and what the cell's run logs."""

    # ------------------------------------------------------------------ running a cell

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        tasks = select_tasks(cell)
        by_id = {task.story_id: task for task in tasks}
        system_prompt = load_system_prompt(
            cell.prompt_setting or "default", cell.extra.get("system_prompts_file", DEFAULT_SYSTEM_PROMPTS_FILE)
        )
        templates = load_turn_templates(cell.extra.get("turns_file", DEFAULT_TURNS_FILE))
        max_regenerations = int(cell.extra.get("max_regenerations", DEFAULT_MAX_REGENERATIONS))
        score_truncated = bool(cell.extra.get("score_truncated", False))
        generator = runtime.backend_for(cell.model)
        backends = {id(generator): generator}
        for judge in cell.judges:
            backend = runtime.backend_for(judge.model)
            backends[id(backend)] = backend
        generated_before = {key: b.generated for key, b in backends.items()}

        summaries: dict[int, dict[str, float]] = {}
        conversation_rows: list[dict[str, Any]] = []
        trajectory_log: list[dict[str, Any]] = []
        records: list[ScoreRecord] = []
        judgments: list[dict[str, Any]] = []

        for seed in cell.seeds:
            observe = SecondsCounter()
            final, attempts_log = self._deliver_with_regeneration(
                cell, runtime, generator, tasks, system_prompt, templates, seed, max_regenerations, observe, score_truncated
            )
            trajectory_log.extend(attempts_log)
            scored = [t for t in final if is_scoreable(t, score_truncated)]
            verdicts = self._judge(cell, runtime, by_id, scored)
            seed_records, failures = self._records(cell, seed, by_id, scored, verdicts, judgments)
            for judge_records in seed_records.values():
                records.extend(judge_records)
            summaries[seed] = self._seed_summary(final, attempts_log, seed_records, failures, scored, observe.total)
            conversation_rows.extend(self._conversation_rows(final, attempts_log, by_id, seed_records))

        # Each judge's number, per seed the mean over its stories, gets an interval from the final turns' rows
        # (which carry the same scores), drawing stories.
        finals = [row for row in conversation_rows if row["final"]]
        metrics = aggregate_seeds(summaries, finals, [row["story_id"] for row in finals])
        metrics["n_tasks"] = float(len(tasks))
        metrics["n_seeds"] = float(len(cell.seeds))
        generated = sum(b.generated - generated_before[key] for key, b in backends.items())
        return CellResult(
            metrics=metrics,
            params=self._params(cell, len(tasks), system_prompt, templates.sha256, max_regenerations, score_truncated),
            tables={"conversations.json": conversation_rows},
            artifacts={
                "trajectories.json": trajectory_log,
                "score_records.json": [r.model_dump(mode="json") for r in records],
                "judgments.json": judgments,
            },
            generated=generated,
        )

    @staticmethod
    def _records(
        cell: CellSpec,
        seed: int,
        by_id: dict[str, WritingTask],
        scored: list[Trajectory],
        verdicts: dict[tuple[str, str], tuple[JudgeResult, JudgeResult]],
        judgments: list[dict[str, Any]],
    ) -> tuple[dict[str, list[ScoreRecord]], dict[str, dict[str, int]]]:
        """Score records of one seed per judge (both verdicts valid), and the judges' failure counts; every
        verdict is appended to `judgments`."""
        seed_records: dict[str, list[ScoreRecord]] = {j.id: [] for j in cell.judges}
        failures: dict[str, dict[str, int]] = {j.id: {"any": 0, "checklist": 0, "quality": 0} for j in cell.judges}
        for trajectory in scored:
            task = by_id[trajectory.story_id]
            for judge in cell.judges:
                checklist, quality = verdicts[(trajectory.story_id, judge.id)]
                judgments.append(
                    {
                        "story_id": task.story_id, "seed": seed, "judge": judge.id,
                        "checklist": checklist.model_dump(mode="json"), "quality": quality.model_dump(mode="json"),
                    }
                )
                failures[judge.id]["checklist"] += not checklist.ok
                failures[judge.id]["quality"] += not quality.ok
                if checklist.ok and quality.ok:
                    seed_records[judge.id].append(score_record(cell, task, seed, judge.id, checklist, quality))
                else:
                    failures[judge.id]["any"] += 1
        return seed_records, failures

    @staticmethod
    def _params(
        cell: CellSpec, n_tasks: int, system_prompt: str, templates_sha256: str, max_regenerations: int, score_truncated: bool
    ) -> dict[str, Any]:
        """Run params beyond the cell spec: prompt and template digests, regeneration policy, rubric files."""
        params: dict[str, Any] = {
            "system_prompt_sha256": hashlib.sha256(system_prompt.encode("utf-8")).hexdigest(),
            "turn_templates_sha256": templates_sha256,
            "max_regenerations": max_regenerations,
            "score_truncated": score_truncated,
            "n_tasks": n_tasks,
            "constraints_path": cell.extra.get("constraints", "constraints.jsonl next to the tasks file"),
        }
        if cell.judges:
            quality_rubrics = sorted({judge.rubric or QUALITY_RUBRIC for judge in cell.judges})
            params["rubrics"] = ",".join([CHECKLIST_RUBRIC, *quality_rubrics])
            params["checklist_rubric_sha256"] = rubric_hash(CHECKLIST_RUBRIC)
            params["quality_rubric_sha256"] = ",".join(rubric_hash(name) for name in quality_rubrics)
        return params

    def _deliver_with_regeneration(
        self, cell, runtime, generator, tasks, system_prompt, templates, seed, max_regenerations, observe, score_truncated
    ) -> tuple[list[Trajectory], list[dict[str, Any]]]:
        """Deliver every task; regenerate truncated trajectories with fresh seeds. Returns the kept
        trajectories (task order) and a log of every attempt (kept or discarded)."""

        def run(subset: list[WritingTask], attempt: int) -> list[Trajectory]:
            return deliver(
                generator, subset, cell.condition, system_prompt, cell.generation, seed,
                attempt=attempt, templates=templates, observe=observe, continue_after_length=score_truncated,
                progress=lambda items, label, total: runtime.progress(
                    items, f"{cell.run_name} seed {seed}{' retry ' + str(attempt) if attempt else ''}: {label}", total
                ),
            )

        current = {t.story_id: (t, 0) for t in run(list(tasks), 0)}
        log: list[dict[str, Any]] = []
        for attempt in range(1, max_regenerations + 1):
            redo = [task for task in tasks if current[task.story_id][0].truncated]
            if not redo:
                break
            for task in redo:
                old, old_attempt = current[task.story_id]
                log.append({"model": cell.model.id, "attempt": old_attempt, "kept": False, **old.model_dump(mode="json")})
            for trajectory in run(redo, attempt):
                current[trajectory.story_id] = (trajectory, attempt)
        for task in tasks:
            trajectory, attempt = current[task.story_id]
            log.append({"model": cell.model.id, "attempt": attempt, "kept": True, **trajectory.model_dump(mode="json")})
        return [current[task.story_id][0] for task in tasks], log

    def _judge(
        self, cell: CellSpec, runtime: Runtime, by_id: dict[str, WritingTask], scored: list[Trajectory]
    ) -> dict[tuple[str, str], tuple[JudgeResult, JudgeResult]]:
        """Every judge's checklist and quality verdicts on every final reply.

        Blinding: the judge sees the full brief, its checklist and the final story only, never the
        model, the condition or the conversation.
        """
        verdicts: dict[tuple[str, str], tuple[JudgeResult, JudgeResult]] = {}
        for judge in cell.judges:
            backend = runtime.backend_for(judge.model)
            for batch in in_batches(scored, backend, runtime.progress, f"{cell.run_name}: judge {judge.id}"):
                items = [
                    {
                        "task": by_id[t.story_id].full_instruction,
                        "requirements": list(by_id[t.story_id].constraints),
                        "response": t.final_text,
                    }
                    for t in batch
                ]
                checklists = judge_checklist(backend, judge, items)
                qualities = judge_quality(backend, judge, items)
                for trajectory, checklist, quality in zip(batch, checklists, qualities):
                    verdicts[(trajectory.story_id, judge.id)] = (checklist, quality)
        return verdicts

    # ------------------------------------------------------------------ what a cell logs

    @staticmethod
    def _seed_summary(
        final: list[Trajectory],
        attempts_log: list[dict[str, Any]],
        seed_records: dict[str, list[ScoreRecord]],
        failures: dict[str, dict[str, int]],
        scored: list[Trajectory],
        generation_seconds: float,
    ) -> dict[str, float]:
        summary: dict[str, float] = {}
        n = len(final) or 1
        n_scored = len(scored)
        summary["truncated_rate"] = sum(t.truncated for t in final) / n
        summary["scored_rate"] = n_scored / n
        summary["scored_truncated_rate"] = sum(t.truncated for t in scored) / n
        summary["regenerated_rate"] = sum(not entry["kept"] for entry in attempts_log) / n
        all_turns = [turn for entry in attempts_log for turn in entry["turns"]]
        summary["prompt_tokens"] = float(sum(turn["prompt_tokens"] for turn in all_turns))
        summary["completion_tokens"] = float(sum(turn["completion_tokens"] for turn in all_turns))
        summary["generation_seconds"] = float(generation_seconds)
        finals = [t.turns[-1] for t in scored]
        summary["final_completion_tokens"] = mean_or_nan(turn.completion_tokens for turn in finals)
        summary["final_prompt_tokens"] = mean_or_nan(turn.prompt_tokens for turn in finals)
        for judge_id, judge_records in seed_records.items():
            for dim in SCORE_DIMENSIONS:
                values = [value for value in (_record_value(r, dim) for r in judge_records) if value is not None]
                summary[judge_key(judge_id, dim)] = mean_or_nan(values)
            counts = failures[judge_id]
            summary[judge_key(judge_id, "failure_rate")] = counts["any"] / n_scored if n_scored else float("nan")
            summary[judge_key(judge_id, "checklist_failure_rate")] = counts["checklist"] / n_scored if n_scored else float("nan")
            summary[judge_key(judge_id, "quality_failure_rate")] = counts["quality"] / n_scored if n_scored else float("nan")
        return summary

    @staticmethod
    def _conversation_rows(
        final: list[Trajectory],
        attempts_log: list[dict[str, Any]],
        by_id: dict[str, WritingTask],
        seed_records: dict[str, list[ScoreRecord]],
    ) -> list[dict[str, Any]]:
        """One row per task x turn of the kept trajectories; the final row carries each judge's scores."""
        attempt_of = {(e["story_id"], e["seed"]): e["attempt"] for e in attempts_log if e["kept"]}
        scores = {(r.story_id, r.judge): r for records in seed_records.values() for r in records}
        judge_ids = list(seed_records)
        rows = []
        for trajectory in final:
            for turn in trajectory.turns:
                row: dict[str, Any] = {
                    "story_id": trajectory.story_id,
                    "genre": by_id[trajectory.story_id].domain,
                    "condition": trajectory.condition,
                    "seed": trajectory.seed,
                    "attempt": attempt_of.get((trajectory.story_id, trajectory.seed), 0),
                    "turn": turn.index,
                    "final": turn.final,
                    "user": turn.user,
                    "reply": turn.text,
                    "prompt_tokens": turn.prompt_tokens,
                    "completion_tokens": turn.completion_tokens,
                    "finish_reason": turn.finish_reason,
                    "truncated": trajectory.truncated,
                }
                if turn.final:
                    for judge_id in judge_ids:
                        record = scores.get((trajectory.story_id, judge_id))
                        for dim in SCORE_DIMENSIONS:
                            row[judge_key(judge_id, dim)] = _record_value(record, dim) if record else None
                rows.append(row)
        return rows


def is_scoreable(trajectory: Trajectory, score_truncated: bool = False) -> bool:
    """Whether a trajectory's final reply may be judged: complete, or (opted in) cut only by the token limit."""
    if not trajectory.turns or not trajectory.turns[-1].final:
        return False
    return not trajectory.truncated or (score_truncated and trajectory.error is None)


def _record_value(record: ScoreRecord, dim: str) -> float | None:
    """One dimension of a score record: adherence (item mean), a quality score, or ci."""
    if dim == "adherence" or dim == "ci":
        items = [float(item["score"]) for item in record.adherence]
        adherence = sum(items) / len(items) if items else None
        if dim == "adherence":
            return adherence
        ci = creative_integrity(adherence if adherence is not None else np.nan, record.quality.get("structure_coherence") or np.nan)
        return None if math.isnan(ci) else ci
    value = record.quality.get(dim)
    return float(value) if value is not None else None


__all__ = ["DeliveryCell", "is_scoreable", "score_record"]
