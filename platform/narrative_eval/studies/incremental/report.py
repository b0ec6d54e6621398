"""The incremental-delivery report: Creative Integrity, ICIR and FULL - X effects from score records.

Files (documented in docs/formats.md), for the comparison condition X (default 'sharded'):

| file | columns |
|---|---|
| model_ci.csv | model, full_ci, <x>_ci, icir, icir_lo, icir_hi, n_pairs (last row ALL, pooled): over matched pairs |
| cell_scores.csv | model, condition, judge, n, ci, adherence, note: per cell over every scored story, as its run logs them |
| paired_effects.csv | dimension, n, full, <x>, delta, lo, hi |
| equal_adherence.csv | dimension, all_pairs_delta, equal_adherence_delta, n_pairs |
| equal_genre.csv | dimension, delta, lo, hi |
| model_effects.csv + model_effects.png | model, dimension, d_av (heatmap) |
| task_composition.csv/.md/.tex | the study's Table 1: tasks, constraints, shards per genre and the evaluation scale |
| length_diagnostics.csv/.md/.tex + .png | the study's Figure 3: final-story words, final-turn prompt tokens per model x condition |

and beside them: paired_effects_by_model.csv (model, dimension, n, full, <x>, delta, lo, hi),
same_judge.csv (paired_effects over pairs scored by one judge, with n), and, when recap or
snowball records are present, icir_by_condition.csv (condition, model, full_ci, ci, icir, icir_lo,
icir_hi). Intervals: story-clustered bootstrap, percentile, seed settable. The two diagnostics
(reports/creative_diagnostics.py) are judge-independent and written once, at the top level.

When several judges scored the same responses (a judge panel) their scores are never pooled:
the top-level files use one judge (`judge=`, default the judge with the most records) and each
judge gets the same files under by_judge/<judge>/.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import re

import numpy as np

from narrative_eval import tracking
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key, judges_logging, metric_column, with_interval
from narrative_eval.reports.judge_card import cell_numbers
from narrative_eval.reports.judge_checks import logged_rows, with_judge_checks
from narrative_eval.reports.juries import logged_weights, write_weighted_juries
from narrative_eval.reports.multi_turn import GROUPS, conversation_numbers, final_rows
from narrative_eval.reports.tables import file_slug, markdown_table, write_csv, write_missing_tables, write_table
from narrative_eval.stats.bootstrap import DEFAULT_N_BOOT
from narrative_eval.studies.incremental.effects import (
    DIMENSIONS,
    adherence_of,
    creative_integrity,
    icir_table,
    judges_per_response,
    model_d_av,
    pair_frame,
    paired_effects,
    paired_effects_by_model,
    primary_judge,
    responses_frame,
    same_judge,
)
from narrative_eval.studies.incremental.effects import equal_adherence as equal_adherence_table
from narrative_eval.studies.incremental.effects import equal_genre as equal_genre_table
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.report_diagnostics import (
    DiagnosticInputs,
    draw_length_diagnostics,
    length_diagnostics,
    records_inputs,
    sweep_inputs,
    task_composition,
)
from narrative_eval.studies.incremental.score_records import load_score_records, save_score_records
from narrative_eval.studies.incremental.turns import replanning_conditions
from narrative_eval.studies.incremental.vocabulary import COMPARISON, ID_COLUMN, NAME, REFERENCE
from narrative_eval.study import experiment_of

pd = lazy_module("pandas")

DIAGNOSTIC_TITLES: dict[str, str] = {
    "task_composition": "Tasks, constraints, shards and evaluation scale per genre",
    "length_diagnostics": "Final-story words and final-turn prompt tokens",
}
"""Title of each judge-independent diagnostic table (file stem -> title)."""


def write_diagnostics(inputs: DiagnosticInputs, out_dir: Path) -> dict[str, str]:
    """task_composition (Table 1) and length_diagnostics (Figure 3; its PNG when any length is known)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lengths = length_diagnostics(inputs.finals, inputs.length_note)
    draw_length_diagnostics(lengths, out_dir / "length_diagnostics.png")
    tables = {"task_composition": task_composition(inputs.tasks, inputs.responses, inputs.task_note),
              "length_diagnostics": lengths}
    return {DIAGNOSTIC_TITLES[name]: write_table(table, out_dir, name) for name, table in tables.items()}


def draw_d_av_heatmap(effects: pd.DataFrame, comparison: str, path: Path) -> None:
    """Heatmap of d_av (model x dimension): blue favours FULL, orange favours the comparison condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap

    grid = effects.pivot(index="model", columns="dimension", values="d_av").reindex(columns=list(DIMENSIONS))
    values = grid.to_numpy(dtype=float)
    finite = np.abs(values[np.isfinite(values)])
    bound = max(float(finite.max()) if finite.size else 1.0, 0.1)
    colours = LinearSegmentedColormap.from_list("full_vs_other", ["#e66101", "#f7f7f7", "#2166ac"])
    fig, ax = plt.subplots(figsize=(1.3 * len(DIMENSIONS) + 2.5, 0.55 * max(len(grid), 1) + 1.8))
    image = ax.imshow(np.ma.masked_invalid(values), cmap=colours, vmin=-bound, vmax=bound, aspect="auto")
    ax.set_xticks(range(len(grid.columns)), [c.replace("_", " ") for c in grid.columns], rotation=30, ha="right")
    ax.set_yticks(range(len(grid.index)), list(grid.index))
    for (row, col), value in np.ndenumerate(values):
        ax.text(col, row, "n/a" if np.isnan(value) else f"{value:+.2f}", ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label=f"d_av (FULL - {comparison.upper()})")
    ax.set_title(f"Model-wise standardized effect, FULL - {comparison.upper()}")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


CELL_SCORES = "cell_scores"
"""The per-cell table: Creative Integrity and adherence over every scored story, the numbers a cell's run logs."""
CELL_SCORES_TITLE = "Creative Integrity and adherence per cell, every scored story"
"""Its title: one table for every judge, a row per judge (never per judge folder)."""
SEED_IN_ID = re.compile(r"/seed(\d+)/")
UNSCORED_REASONS: tuple[tuple[str, str], ...] = (
    ("scored_rate", "no story could be judged (every reply was cut or missing)"),
    ("checklist_failure_rate", "{judge}'s checklist failed on every story"),
    ("quality_failure_rate", "{judge}'s quality rating failed on every story"),
)
"""Why a cell has no score record, from its run's metrics: (metric, reason) where the metric reads 0 for the first,
1 for the others (each judge's, under its key)."""


def cell_scores(records: Iterable[ScoreRecord], unscored: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per cell (model x condition) and judge, over every story that judge scored: n scored responses, Creative
    Integrity and adherence as the cell's run logs them (`judge/<judge>/ci`: the mean over stories, then over seeds).
    ICIR and the paired effects use matched FULL/X pairs instead (`model_ci.csv` gives their n_pairs). Cells with no
    score record (`unscored`) get a row with n 0 and the reason."""
    rows = []
    for record in records:
        seed = SEED_IN_ID.search(record.record_id)
        adherence = adherence_of(record)
        rows.append({"model": record.model, "condition": record.condition, "judge": record.judge,
                     "seed": int(seed.group(1)) if seed else 0, "adherence": adherence,
                     "ci": creative_integrity(adherence, record.quality.get("structure_coherence") or np.nan)})
    frame = pd.DataFrame(rows, columns=["model", "condition", "judge", "seed", "adherence", "ci"])
    key = ["model", "condition", "judge"]
    per_seed = frame.groupby([*key, "seed"], sort=False)[["ci", "adherence"]].mean()
    table = per_seed.groupby(level=key, sort=False).mean()
    table["n"] = frame.groupby(key, sort=False)["ci"].count()
    table = table.reset_index()[[*key, "n", "ci", "adherence"]]
    table["note"] = ""
    if unscored is not None and not unscored.empty:
        table = pd.concat([table, unscored.assign(n=0, ci=np.nan, adherence=np.nan)[table.columns]], ignore_index=True)
    return table


def unscored_cells(runs: pd.DataFrame, records: Iterable[ScoreRecord]) -> pd.DataFrame:
    """The finished cell runs with a judge but no score record from it, each with why (model, condition, judge, note),
    read from the run's own rates."""
    scored = {(r.model, r.condition, r.judge) for r in records}
    rows = []
    for _, run in runs.iterrows():
        setting = run.get("params.prompt_setting")
        model = str(run.get("params.model_id"))
        model = model if setting in (None, "", "default") or setting != setting else f"{model} [{setting}]"
        for judge in judges_logging(runs.columns, "failure_rate"):
            failure_rate = run.get(metric_column(judge_key(judge, "failure_rate")))
            if (model, run.get("params.condition"), judge) in scored or pd.isna(failure_rate):
                continue
            reason = next((words.format(judge=judge) for metric, words in UNSCORED_REASONS
                           if run.get(metric_column(metric if metric == "scored_rate" else judge_key(judge, metric)))
                           == (0.0 if metric == "scored_rate" else 1.0)),
                          f"{judge} scored none of its stories")
            rows.append({"model": model, "condition": run.get("params.condition"), "judge": judge, "note": reason})
    return pd.DataFrame(rows, columns=["model", "condition", "judge", "note"])


def unpaired_reasons(responses: pd.DataFrame, pairs: pd.DataFrame, comparison: str,
                     unscored: pd.DataFrame | None) -> dict[str, str]:
    """Model -> why it has no row in the paired tables (no scored story of one condition, or none under both), for
    every model without a matched pair."""
    models = set(responses["model"]) | (set(unscored["model"]) if unscored is not None and not unscored.empty else set())
    reasons = {}
    for model in sorted(models - set(pairs["model"])):
        conditions = set(responses.loc[responses["model"] == model, "condition"])
        lacking = [c.upper() for c in (REFERENCE, comparison) if c not in conditions]
        why = [n for n in (unscored["note"][unscored["model"] == model] if unscored is not None and not unscored.empty
                           else []) if n]
        reason = f"no scored {' or '.join(lacking)} story" if lacking else "no story scored under both conditions"
        reasons[model] = f"{reason}{'; ' + '; '.join(dict.fromkeys(why)) if why else ''}"
    return reasons


def unpaired_note(responses: pd.DataFrame, pairs: pd.DataFrame, comparison: str, unscored: pd.DataFrame | None) -> str:
    """One line per model that has no row in the paired tables, saying why (no scored story of one condition)."""
    lines = [f"> - {model}: no matched pair ({why})."
             for model, why in unpaired_reasons(responses, pairs, comparison, unscored).items()]
    # Quoted: a report's notes under a table are its quoted lines, which the app's Figures tab shows with the table.
    return ("\n\n> Models without a row: they have no matched FULL/" + comparison.upper() + " pair.\n" + "\n".join(lines)
            if lines else "")


PAIRED_TABLES = ("model_ci", "paired_effects", "paired_effects_by_model", "equal_adherence", "equal_genre",
                 "same_judge", "model_effects")
"""The tables over matched FULL/X pairs (file stems): a report without a pair records them as missing, with why."""


def missing_comparison(responses: pd.DataFrame, comparison: str, judge: str | None,
                       unscored: pd.DataFrame | None) -> str:
    """Why no FULL/X pair can be formed from the records (no scored story of a condition, or no story scored under
    both by one model), with each model's reason and where to look; empty when there is a pair."""
    present = set(responses["condition"])
    lacking = [c.upper() for c in (REFERENCE, comparison) if c not in present]
    if lacking:
        reason = (f"no scored {' or '.join(lacking)} story to compare (conditions scored: "
                  f"{', '.join(sorted(c.upper() for c in present)) or 'none'})")
    else:
        pairs = pair_frame(responses, comparison, judge)
        if not pairs.empty:
            return ""
        per_model = unpaired_reasons(responses, pairs, comparison, unscored)
        reason = (f"no matched FULL/{comparison.upper()} pair (a pair is one story scored under both conditions for "
                  f"one model{f', by judge {judge}' if judge else ''}): "
                  + "; ".join(f"{model}: {why}" for model, why in per_model.items()))
    failure_rate = judge_key("<judge>", "failure_rate")
    return (f"{reason}. Each cell's `{failure_rate}` and `truncated_rate` say how many responses went unscored; "
            "the per-cell table and `score_records.jsonl` hold what was scored.")


def _write_set(
    responses: pd.DataFrame, out_dir: Path, comparison: str, judge: str | None, n_boot: int, seed: int,
    unscored: pd.DataFrame | None = None,
) -> dict[str, str]:
    """The report files of docs/formats.md (and the extras) for one judge's records (or all, when one judge per response)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = pair_frame(responses, comparison, judge)
    x = comparison
    upper = comparison.upper()
    suffix = f" (judge {judge})" if judge else ""
    tables: dict[str, str] = {}

    model_ci = icir_table(pairs, n_boot, seed).rename(columns={"x_ci": f"{x}_ci"})
    model_ci = model_ci[["model", "full_ci", f"{x}_ci", *with_interval("icir"), "n_pairs"]]
    note = unpaired_note(responses, pairs, comparison, unscored)
    tables[f"Creative Integrity and ICIR, FULL vs {upper}{suffix}"] = write_table(model_ci, out_dir, "model_ci") + note
    if note:
        with open(out_dir / "model_ci.md", "a", encoding="utf-8") as markdown:
            markdown.write(note.lstrip("\n") + "\n")

    effects = paired_effects(pairs, n_boot, seed).rename(columns={"x": x})
    write_csv(effects[["dimension", "n", "full", x, "delta", "lo", "hi"]], out_dir / "paired_effects.csv")
    tables[f"Paired FULL - {upper} effects{suffix}"] = markdown_table(effects)

    by_model = paired_effects_by_model(pairs, n_boot, seed).rename(columns={"x": x})
    write_csv(by_model, out_dir / "paired_effects_by_model.csv")
    tables[f"Paired FULL - {upper} effects by model{suffix}"] = markdown_table(by_model)

    equal = equal_adherence_table(pairs)
    write_csv(equal, out_dir / "equal_adherence.csv")
    tables[f"Equal-adherence pairs, FULL - {upper}{suffix}"] = markdown_table(equal)

    genre = equal_genre_table(pairs, n_boot, seed)
    write_csv(genre, out_dir / "equal_genre.csv")
    tables[f"Equal-genre weighting, FULL - {upper}{suffix}"] = markdown_table(genre)

    same = same_judge(pairs, n_boot, seed).rename(columns={"x": x})
    write_csv(same, out_dir / "same_judge.csv")
    tables[f"Pairs scored by the same judge, FULL - {upper}{suffix}"] = markdown_table(same)

    d_av = model_d_av(pairs)
    write_csv(d_av, out_dir / "model_effects.csv")
    draw_d_av_heatmap(d_av, comparison, out_dir / "model_effects.png")
    wide = d_av.pivot(index="model", columns="dimension", values="d_av").reindex(columns=list(DIMENSIONS)).reset_index()
    tables[f"Model-wise d_av, FULL - {upper}{suffix}"] = markdown_table(wide)
    return tables


def icir_by_condition(responses: pd.DataFrame, judge: str | None, n_boot: int, seed: int) -> pd.DataFrame:
    """ICIR of every non-full condition against FULL, per model and pooled."""
    frames = []
    for condition in sorted(set(responses["condition"]) - {REFERENCE}):
        pairs = pair_frame(responses, condition, judge)
        if pairs.empty:
            continue
        table = icir_table(pairs, n_boot, seed).rename(columns={"x_ci": "ci"})
        table.insert(0, "condition", condition)
        frames.append(table[["condition", "model", "full_ci", "ci", *with_interval("icir")]])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def write_creative_report(
    records: Iterable[ScoreRecord],
    out_dir: str | Path,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    comparison: str = COMPARISON,
    judge: str | None = None,
    diagnostics: DiagnosticInputs | None = None,
    unscored: pd.DataFrame | None = None,
) -> dict[str, str]:
    """Write the report files to out_dir and return title -> markdown table (for the terminal and MLflow).
    `diagnostics` feed Table 1 and Figure 3 (default: what the records alone tell); `unscored` are the cells without a
    score record and why (unscored_cells). Records that make no FULL/X pair (a condition unscored, or no story scored
    under both) leave the paired tables out, recorded as missing with why (reports.tables.write_missing_tables)."""
    out_dir = Path(out_dir)
    records = list(records)
    responses = responses_frame(records)
    cells = write_cell_scores(records, out_dir, unscored)
    judges = sorted(responses["judge"].unique())
    panel = judges_per_response(responses) > 1
    if judge is not None and judge not in judges:
        raise ValueError(f"no records from judge {judge!r} (judges: {', '.join(judges)})")
    if panel and judge is None:
        judge = primary_judge(responses)

    reason = missing_comparison(responses, comparison, judge, unscored)
    if reason:
        tables = {**write_missing_tables(out_dir, dict.fromkeys(PAIRED_TABLES, reason)), **cells}
        tables.update(write_diagnostics(diagnostics or records_inputs(records), out_dir))
        return tables
    write_missing_tables(out_dir, {})
    tables = {**_write_set(responses, out_dir, comparison, judge, n_boot, seed, unscored), **cells}
    if set(responses["condition"]) & set(replanning_conditions()):
        by_condition = icir_by_condition(responses, judge, n_boot, seed)
        write_csv(by_condition, out_dir / "icir_by_condition.csv")
        tables["ICIR of every condition against FULL" + (f" (judge {judge})" if judge else "")] = markdown_table(by_condition)
    if panel:
        for other in judges:
            if pair_frame(responses, comparison, other).empty:  # this judge scored no complete pair
                continue
            _write_set(responses, out_dir / "by_judge" / file_slug(other), comparison, other, n_boot, seed)
    tables.update(write_diagnostics(diagnostics or records_inputs(records), out_dir))
    return tables


def write_cell_scores(records: list[ScoreRecord], out_dir: Path, unscored: pd.DataFrame | None) -> dict[str, str]:
    """cell_scores.csv (and .md, .tex): the per-cell numbers the Runs tab shows, with their n."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return {CELL_SCORES_TITLE: write_table(
        cell_scores(records, unscored), out_dir, CELL_SCORES)}


def creative_report_from_scores(path: str | Path, out_dir: str | Path, n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> dict[str, str]:
    """The report from a score-record JSONL file (published or external judgments; nothing is regenerated)."""
    return write_creative_report(load_score_records(path), out_dir, n_boot=n_boot, seed=seed)


def export_sweep_records(sweep: str, out_dir: str | Path, data_sha256: str | None = None) -> list[ScoreRecord]:
    """The score records of an incremental-delivery sweep's finished cell runs in MLflow (those on `data_sha256`
    when given), exported to out_dir/score_records.jsonl so the analysis can be rerun or shared without MLflow."""
    runs = tracking.report_cell_runs(experiment_of(NAME), sweep, data_sha256)
    records: list[ScoreRecord] = []
    for run_id in runs["run_id"]:
        records.extend(ScoreRecord(**payload) for payload in tracking.load_json_artifact(run_id, "score_records.json"))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_score_records(records, out_dir / "score_records.jsonl")
    return records


def creative_report_from_sweep(sweep: str, out_dir: str | Path, n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
                               data_sha256: str | None = None) -> dict[str, str]:
    """The report from an incremental-delivery sweep's finished cell runs in MLflow, its score records exported
    beside it as score_records.jsonl; Table 1 and Figure 3 from the cells' tasks and conversations; the judges'
    control checks last, with a note under the tables of a judge that failed one."""
    records = export_sweep_records(sweep, out_dir, data_sha256)
    diagnostics = sweep_inputs(sweep, records, data_sha256)
    runs = tracking.report_cell_runs(experiment_of(NAME), sweep, data_sha256)
    unscored = unscored_cells(runs, records)
    tables = write_creative_report(records, out_dir, n_boot=n_boot, seed=seed, diagnostics=diagnostics,
                                   unscored=unscored)
    # The judges that judged every final story several times: their noise beside the gaps between the cells.
    finals = final_rows(runs)
    noise, numbers = conversation_numbers(experiment_of(NAME), sweep, data_sha256, out_dir, finals, ID_COLUMN)
    # Weighted juries, combined from their members' verdicts on the final stories after the control checks.
    juries = write_weighted_juries(finals, logged_weights(experiment_of(NAME), sweep, data_sha256), GROUPS, out_dir)
    return with_sweep_checks({**tables, **noise, **juries}, sweep, out_dir, data_sha256, numbers=numbers)


def with_sweep_checks(tables: dict[str, str], sweep: str, out_dir: str | Path, data_sha256: str | None = None,
                      index: bool = True, numbers: dict[str, dict[str, float]] | None = None) -> dict[str, str]:
    """The tables with the sweep's judge control checks (reports.judge_checks.with_judge_checks): every table but
    the judge-independent diagnostics rests on the judges' scores, one judge's when its title names it. With the
    index (the report card), `numbers` are what the card reads of each judge (default: reports.judge_card's
    cell_numbers)."""
    rows = logged_rows(experiment_of(NAME), sweep, data_sha256)
    judges = list(dict.fromkeys(row.judge for row in rows))
    judged = {title: [] if title in DIAGNOSTIC_TITLES.values() else
              [judge for judge in judges if f"(judge {judge})" in title] or judges for title in tables}
    if index and numbers is None:
        numbers = cell_numbers(experiment_of(NAME), sweep, data_sha256)
    return with_judge_checks(tables, rows, out_dir, judged, index=index, numbers=numbers if index else None)
