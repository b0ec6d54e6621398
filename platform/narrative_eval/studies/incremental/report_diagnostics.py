"""Descriptive diagnostics of the incremental-delivery study: its Table 1 and Figure 3.

- Table 1, task composition: tasks, checklist items and shards per genre, and the evaluation scale they make
  (delivery variants, responses, matched pairs, judge calls).
- Figure 3, length diagnostics: words of the final story and prompt tokens of the final turn per model x
  condition (mean, sd, median, n).

Both are computed from `DiagnosticInputs`: from a sweep (`sweep_inputs`) the tasks each cell ran (its task file
and limit, when the file is still there unchanged), the grid's planned responses and each cell run's
`conversations.json`; from score records alone (`records_inputs`) the scored tasks and responses, with shards,
story words and prompt tokens missing (NaN) and a note saying why. creative.py writes the tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec
from narrative_eval.studies.incremental.cell_tasks import tasks_of_cell
from narrative_eval.studies.incremental.records import ScoreRecord, WritingTask
from narrative_eval.studies.incremental.score_records import model_label
from narrative_eval.studies.incremental.tasks import GENRES
from narrative_eval.studies.incremental.turns import CONDITIONS
from narrative_eval.studies.incremental.vocabulary import FULL, NAME, REFERENCE, SHARDED
from narrative_eval.study import experiment_of

pd = lazy_module("pandas")

COMPOSITION_COLUMNS: tuple[str, ...] = (
    "genre", "n_tasks", "n_constraints", "constraints_per_task", "shards_mean", "shards_min", "shards_max",
    "delivery_variants", "responses", "matched_pairs", "judge_calls", "note",
)
"""Columns of task_composition.csv (one row per genre, then ALL)."""

LENGTH_COLUMNS: tuple[str, ...] = (
    "model", "condition", "n", "words_mean", "words_sd", "words_median",
    "prompt_tokens_n", "prompt_tokens_mean", "prompt_tokens_sd", "prompt_tokens_median", "note",
)
"""Columns of length_diagnostics.csv (one row per model x condition)."""

RESPONSE_COLUMNS: tuple[str, ...] = ("model", "condition", "story_id", "genre", "seed", "n_judges")
"""Columns of DiagnosticInputs.responses."""

JUDGE_CALLS_PER_RESPONSE = 2
"""Judge requests per response and judge: the checklist and the quality rubric (retries not counted)."""

RECORDS_LENGTH_NOTE = "score records hold no story text or prompt tokens"
"""Why a report from a score-record file alone has no lengths."""


@dataclass
class DiagnosticInputs:
    """What Table 1 and Figure 3 are computed from."""

    tasks: pd.DataFrame
    """One row per task: story_id, genre, n_constraints, n_shards (NaN when unknown)."""
    responses: pd.DataFrame
    """One row per response (planned by a sweep's grid, or scored in a file): model, condition, story_id, genre,
    seed, n_judges."""
    finals: pd.DataFrame
    """One row per final story: model, condition, reply (None when unknown), prompt_tokens (NaN when unknown)."""
    task_note: str = ""
    """Why the tasks come from score records (shards unknown), empty when they come from the task file."""
    length_note: str = ""
    """Why story words or prompt tokens are missing, empty when the conversations were read."""


def task_frame(tasks: Iterable[WritingTask]) -> pd.DataFrame:
    """One row per task of a task file: story_id, genre, n_constraints, n_shards."""
    rows = [{"story_id": t.story_id, "genre": t.domain, "n_constraints": len(t.constraints), "n_shards": len(t.shards)}
            for t in tasks]
    return pd.DataFrame(rows, columns=["story_id", "genre", "n_constraints", "n_shards"]).drop_duplicates("story_id")


def records_inputs(records: Sequence[ScoreRecord], task_note: str = "tasks read from score records: shards unknown",
                   length_note: str = RECORDS_LENGTH_NOTE) -> DiagnosticInputs:
    """The diagnostics' inputs from score records alone: a task's checklist is the constraint ids its records
    scored, a response is one (story, model, condition, k-th record of each judge) and has no text."""
    frame = pd.DataFrame(
        [{"record_id": r.record_id, "story_id": r.story_id, "genre": r.genre, "model": r.model, "condition": r.condition,
          "judge": r.judge, "constraints": frozenset(item["constraint_id"] for item in r.adherence)} for r in records],
        columns=["record_id", "story_id", "genre", "model", "condition", "judge", "constraints"],
    ).sort_values("record_id")
    tasks = frame.groupby("story_id", as_index=False, sort=True).agg(
        genre=("genre", "first"), n_constraints=("constraints", lambda sets: len(frozenset().union(*sets))))
    tasks["n_shards"] = np.nan
    # Several records of one judge on one (story, model, condition) are its seeds.
    frame["seed"] = frame.groupby(["story_id", "model", "condition", "judge"]).cumcount()
    responses = frame.groupby(list(RESPONSE_COLUMNS[:-1]), as_index=False).agg(n_judges=("judge", "nunique"))
    finals = responses[["model", "condition"]].assign(reply=None, prompt_tokens=np.nan)
    return DiagnosticInputs(tasks, responses, finals, task_note, length_note)


def _ordered(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """Distinct values, those in `order` first in its order, the rest sorted."""
    present = set(values)
    return [v for v in order if v in present] + sorted(present - set(order))


def _composition_row(genre: str, tasks: pd.DataFrame, responses: pd.DataFrame, note: str) -> dict:
    shards = tasks["n_shards"].astype(float)
    full = responses[responses["condition"] == REFERENCE][["model", "story_id"]].drop_duplicates()
    others = responses[responses["condition"] != REFERENCE][["model", "story_id", "condition"]].drop_duplicates()
    n_tasks = len(tasks)
    n_constraints = int(tasks["n_constraints"].sum())
    return {
        "genre": genre,
        "n_tasks": n_tasks,
        "n_constraints": n_constraints,
        "constraints_per_task": n_constraints / n_tasks if n_tasks else np.nan,
        "shards_mean": shards.mean(),
        "shards_min": shards.min(),
        "shards_max": shards.max(),
        "delivery_variants": len(responses[["story_id", "condition"]].drop_duplicates()),
        "responses": len(responses),
        "matched_pairs": len(full.merge(others, on=["model", "story_id"])),
        "judge_calls": JUDGE_CALLS_PER_RESPONSE * int(responses["n_judges"].sum()),
        "note": note,
    }


def task_composition(tasks: pd.DataFrame, responses: pd.DataFrame, note: str = "") -> pd.DataFrame:
    """The study's Table 1: per genre (study order, then others) and ALL, the tasks, their checklist items and
    shards, delivery variants (task x condition), responses (one per task, model, condition and seed), matched
    pairs ((task, model) with FULL and another condition, per other condition; seeds are averaged as in the
    paired analysis) and judge calls (JUDGE_CALLS_PER_RESPONSE per response and judge)."""
    genres = _ordered([*tasks["genre"], *responses["genre"]], GENRES)
    rows = [_composition_row(g, tasks[tasks["genre"] == g], responses[responses["genre"] == g], note) for g in genres]
    rows.append(_composition_row("ALL", tasks, responses, note))
    return pd.DataFrame(rows, columns=list(COMPOSITION_COLUMNS))


def word_count(text: str | None) -> float:
    """Words of a story: runs of non-space characters; NaN when the text is unknown."""
    return float(len(text.split())) if isinstance(text, str) else np.nan


def _summary(values: pd.Series) -> tuple[int, float, float, float]:
    """n, mean, sample sd and median of the finite values (NaN where undefined)."""
    finite = values[np.isfinite(values)]
    if finite.empty:
        return 0, np.nan, np.nan, np.nan
    return len(finite), float(finite.mean()), float(finite.std(ddof=1)), float(finite.median())


def length_diagnostics(finals: pd.DataFrame, note: str = "") -> pd.DataFrame:
    """The study's Figure 3 as a table: per model x condition, the final stories (n), their words and the
    prompt tokens of their final turn (mean, sd, median over the stories that report them; a count of 0 tokens
    means the backend reported none)."""
    words = finals["reply"].map(word_count).astype(float)
    tokens = pd.to_numeric(finals["prompt_tokens"], errors="coerce").astype(float)
    tokens = tokens.where(tokens > 0)
    frame = finals.assign(words=words, tokens=tokens)
    rows = []
    for model in sorted(frame["model"].unique()):
        of_model = frame[frame["model"] == model]
        for condition in _ordered(of_model["condition"], CONDITIONS.names()):
            group = of_model[of_model["condition"] == condition]
            w_n, w_mean, w_sd, w_median = _summary(group["words"])
            t_n, t_mean, t_sd, t_median = _summary(group["tokens"])
            notes = [note] if note else []
            if w_n and t_n < len(group):  # stories read, but the backend left some token counts out
                notes.append(f"no prompt tokens reported for {len(group) - t_n} of {len(group)} stories")
            rows.append({"model": model, "condition": condition, "n": len(group), "words_mean": w_mean,
                         "words_sd": w_sd, "words_median": w_median, "prompt_tokens_n": t_n,
                         "prompt_tokens_mean": t_mean, "prompt_tokens_sd": t_sd, "prompt_tokens_median": t_median,
                         "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=list(LENGTH_COLUMNS))


CONDITION_COLOURS = {FULL: "#2166ac", SHARDED: "#e66101"}
"""Bar colours of the two main conditions (as in the d_av heatmap); others take the default cycle."""


def draw_length_diagnostics(table: pd.DataFrame, path: Path) -> bool:
    """Bars of mean words (left) and final-turn prompt tokens (right) per model, one bar per condition, SD as
    error bars. Returns False (and draws nothing) when the table holds no length at all."""
    panels = (("words", "final story words"), ("prompt_tokens", "final-turn prompt tokens"))
    if not any(np.isfinite(table[f"{name}_mean"].astype(float)).any() for name, _ in panels):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted(table["model"].unique())
    conditions = _ordered(table["condition"], CONDITIONS.names())
    width = 0.8 / len(conditions)
    fig, axes = plt.subplots(1, 2, figsize=(2 * max(4.0, 1.1 * len(models) + 1.5), 4.2))
    for ax, (name, label) in zip(axes, panels):
        for k, condition in enumerate(conditions):
            rows = table[table["condition"] == condition].set_index("model").reindex(models)
            ax.bar(np.arange(len(models)) + (k - (len(conditions) - 1) / 2) * width, rows[f"{name}_mean"].astype(float),
                   width, yerr=rows[f"{name}_sd"].astype(float).fillna(0), capsize=2, label=condition.upper(),
                   color=CONDITION_COLOURS.get(condition))
        ax.set_xticks(range(len(models)), models, rotation=30, ha="right")
        ax.set_ylabel(f"{label} (mean ± sd)")
        ax.set_title(label.capitalize())
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


def final_stories(table: pd.DataFrame, model: str, condition: str) -> pd.DataFrame:
    """The final stories of one cell's conversations table (rows per story x turn; `final` marks the judged
    reply, which only a scoreable trajectory has): model, condition, reply, prompt_tokens."""
    columns = ["model", "condition", "reply", "prompt_tokens"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    finals = table[table["final"].astype(bool)]
    return finals.assign(model=model, condition=condition)[columns]


def sweep_inputs(sweep: str, records: Sequence[ScoreRecord], data_sha256: str | None = None) -> DiagnosticInputs:
    """The diagnostics' inputs from an incremental-delivery sweep's finished cell runs: each cell's tasks and
    grid (model, condition, seeds, judges) from its cell_spec.json, its final stories from conversations.json.
    A cell whose task file is gone or changed makes the tasks and scale come from `records`, with a note."""
    from mlflow.exceptions import MlflowException
    from pydantic import ValidationError

    runs = tracking.report_cell_runs(experiment_of(NAME), sweep, data_sha256)
    tasks: list[WritingTask] = []
    responses: list[dict] = []
    finals: list[pd.DataFrame] = []
    task_problems: list[str] = []
    length_problems: list[str] = []
    for run_id in runs["run_id"]:
        try:
            cell = CellSpec.model_validate(tracking.load_json_artifact(run_id, "cell_spec.json"))
        except (MlflowException, OSError, ValidationError):
            task_problems.append(f"run {run_id} has no readable cell_spec.json")
            length_problems.append(f"run {run_id} skipped (no readable cell_spec.json)")
            continue
        label = model_label(cell)
        try:
            finals.append(final_stories(tracking.load_table(run_id, "conversations.json"), label, cell.condition))
        except (MlflowException, OSError):
            length_problems.append(f"run {run_id} ({cell.run_name}) has no conversations.json")
        try:
            ran = tasks_of_cell(cell)
        except ValueError as error:
            task_problems.append(str(error))
            continue
        tasks.extend(ran)
        responses.extend({"model": label, "condition": cell.condition, "story_id": t.story_id, "genre": t.domain,
                          "seed": seed, "n_judges": len(cell.judges)} for t in ran for seed in cell.seeds)
    length_note = "; ".join(length_problems)
    if task_problems:
        note = "; ".join(sorted(set(task_problems))) + ": tasks read from score records, shards unknown"
        inputs = records_inputs(records, task_note=note)
    else:
        inputs = DiagnosticInputs(task_frame(tasks), pd.DataFrame(responses, columns=list(RESPONSE_COLUMNS)), pd.DataFrame())
    inputs.finals = pd.concat(finals, ignore_index=True) if finals else final_stories(pd.DataFrame(), "", "")
    inputs.length_note = length_note
    return inputs
