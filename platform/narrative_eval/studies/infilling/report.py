"""Tables and figures of an infilling sweep, read back from MLflow, each as CSV, markdown and LaTeX where the
sweep's grid supports it: main (model x setting, with intervals), AtAvg and QAvg pivots, seeds, judges,
position and domain breakdowns, Kendall tau of judge dimensions vs metrics, paired comparisons and the minimum
detectable effect, human agreement (the study's Table 2) with human-anchored (prediction-powered) means,
samples of fills a judge rated above 4, and the judges' control checks (a note under the tables of a judge that
failed one)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from narrative_eval import annotations, tracking
from narrative_eval.judges import load_rubric
from narrative_eval.judges.agreement import cohen_kappa
from narrative_eval.judges.judge import HIGH_QUALITY_THRESHOLD
from narrative_eval.lazy import lazy_module
from narrative_eval.metrics import METRICS, at_avg_names
from narrative_eval.records import finite_number
from narrative_eval.records.keys import (interval_keys, is_spread, judge_key, judge_prefix, judges_logging,
                                         metric_column, with_interval)
from narrative_eval.reports.human_ratings import (alt_test, anchored_outputs, human_agreement_table, human_rho,
                                                  stored_ratings)
from narrative_eval.reports.judge_card import judge_numbers
from narrative_eval.reports.juries import logged_weights, weighed_with_people, write_weighted_juries
from narrative_eval.reports.judge_checks import logged_rows, with_judge_checks
from narrative_eval.reports.tables import fold_intervals, latex_text
from narrative_eval.stats.alt_test import EPSILON
from narrative_eval.stats.cell_scores import group_intervals, passage_of, row_judges
from narrative_eval.stats.mde import mde_table
from narrative_eval.stats.paired import model_groups, paired_judges, paired_models, paired_settings
from narrative_eval.stats.ppi import AnchoredOutputs
from narrative_eval.stats.reference import beside_reference, load_reference
from narrative_eval.studies.infilling.report_samples import high_quality_tables
from narrative_eval.studies.infilling.vocabulary import ID_COLUMN, NAME
from narrative_eval.study import experiment_of

pd = lazy_module("pandas")

HUMAN_RUBRIC = "infilling_narrative"
"""The rubric whose dimensions human raters score (the app's Annotate tab uses the same one)."""


def _judges(runs: pd.DataFrame) -> list[str]:
    return judges_logging(runs.columns, "qavg")


def _dimensions(runs: pd.DataFrame, judge: str) -> list[str]:
    skip = {"qavg", "high_pct", "failure_rate", "n_judged"}
    prefix = metric_column(judge_prefix(judge))
    return sorted(
        c[len(prefix):] for c in runs.columns
        if c.startswith(prefix) and not is_spread(c) and c[len(prefix):] not in skip
    )


def _metrics(runs: pd.DataFrame) -> list[str]:
    """Registered metrics to show: the AtAvg ones always, any other one where the sweep logged it."""
    return [m for m in METRICS.names() if m in at_avg_names() or f"metrics.{m}" in runs]


def _seed_count(runs: pd.DataFrame) -> int:
    return int(runs["metrics.n_seeds"].max()) if "metrics.n_seeds" in runs else 1


def _write(table: pd.DataFrame, out_dir: Path, name: str, float_format: str = "%.3f") -> str:
    """CSV as is (intervals as `_lo`/`_hi` columns); markdown and LaTeX with intervals folded into `mean [lo, hi]`,
    LaTeX under readable names."""
    table.to_csv(out_dir / f"{name}.csv", index=False)
    shown = fold_intervals(table)
    markdown = shown.to_markdown(index=False, floatfmt=".3f") if not shown.empty else "(empty)"
    (out_dir / f"{name}.md").write_text(markdown + "\n")
    (out_dir / f"{name}.tex").write_text(latex_text(shown, float_format))
    return markdown


def _cells(runs: pd.DataFrame) -> pd.DataFrame:
    return runs.assign(model=runs["params.model_id"], setting=runs["params.prompt_setting"])


def main_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per model x prompt setting with every automatic metric, AtAvg and each judge's dimensions."""
    runs = _cells(runs)
    columns: dict[str, object] = {"model": runs["model"], "setting": runs["setting"]}
    for name in (*_metrics(runs), "at_avg"):
        _with_interval(columns, runs, name, f"metrics.{name}")
    columns["extraction_success_rate"] = runs.get("metrics.extraction_success_rate", np.nan)
    for judge in _judges(runs):
        for dimension in (*_dimensions(runs, judge), "qavg", "high_pct"):
            _with_interval(columns, runs, f"{judge}:{dimension}", metric_column(judge_key(judge, dimension)))
        columns[f"{judge}:failure_rate"] = runs.get(metric_column(judge_key(judge, "failure_rate")), np.nan)
    # Built at once: a column at a time, a panel of judges leaves pandas a fragmented frame (and a warning).
    table = pd.DataFrame(columns, index=runs.index)
    return table.sort_values(["model", "setting"]).reset_index(drop=True)


def _with_interval(columns: dict[str, object], runs: pd.DataFrame, name: str, column: str) -> None:
    """Add column `name` and its bootstrap interval `name_lo`, `name_hi` (NaN where a run logged none)."""
    for ours, logged in zip(with_interval(name), with_interval(column), strict=True):
        columns[ours] = runs.get(logged, np.nan)


def pivot(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    runs = _cells(runs)
    column = f"metrics.{metric}"
    if column not in runs:
        return pd.DataFrame()
    table = runs.pivot_table(index="model", columns="setting", values=column, aggfunc="mean")
    return table.reset_index()


def seed_table(runs: pd.DataFrame) -> pd.DataFrame:
    """QAvg (per judge) and AtAvg as mean ± SD across the seeds run inside each cell."""
    runs = _cells(runs)
    rows = []
    for _, run in runs.iterrows():
        row: dict[str, Any] = {"model": run["model"], "setting": run["setting"], "seeds": int(run.get("metrics.n_seeds", 1))}
        for key, label in [("at_avg", "AtAvg")] + [(judge_key(j, "qavg"), f"QAvg[{j}]") for j in _judges(runs)]:
            mean, sd = run.get(f"metrics.{key}", np.nan), run.get(f"metrics.{key}_sd", np.nan)
            if finite_number(mean) is None:
                row[label] = "n/a"
            else:  # one seed has no SD: the mean alone
                row[label] = f"{mean:.4f} ± {sd:.4f}" if finite_number(sd) is not None else f"{mean:.4f}"
            row.update({ours: run.get(logged, np.nan)
                        for ours, logged in zip(interval_keys(label), interval_keys(metric_column(key)), strict=True)})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["model", "setting"]).reset_index(drop=True)


def judge_table(runs: pd.DataFrame) -> pd.DataFrame:
    runs = _cells(runs)
    columns: dict[str, object] = {"model": runs["model"], "setting": runs["setting"]}
    for judge in _judges(runs):
        _with_interval(columns, runs, judge, metric_column(judge_key(judge, "qavg")))
    table = pd.DataFrame(columns, index=runs.index).sort_values(["model", "setting"]).reset_index(drop=True)
    for judge in _judges(runs):
        table[f"rank[{judge}]"] = table[judge].rank(ascending=False, method="min")
    return table


def generations(runs: pd.DataFrame) -> pd.DataFrame:
    """Every cell's generations table, stacked, with model and setting columns."""
    frames = []
    for _, run in _cells(runs).iterrows():
        try:
            frame = tracking.load_table(run["run_id"], "generations.json")
        except Exception:  # a run without a table (failed mid-logging) is skipped, not fatal
            continue
        frames.append(frame.assign(model=run["model"], setting=run["setting"], run_id=run["run_id"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def breakdown(gens: pd.DataFrame, by: str, judge: str) -> pd.DataFrame:
    """Avg QAvg / High% of one judge by blank position or domain, per prompt setting."""
    column = judge_key(judge, "qavg")
    if gens.empty or column not in gens:
        return pd.DataFrame()
    valid = gens[pd.to_numeric(gens[column], errors="coerce").notna()].copy()
    valid[column] = valid[column].astype(float)
    if valid.empty:  # every judgment failed: nothing to break down
        return pd.DataFrame()
    high = valid.groupby(["setting", by])[column].agg(lambda s: 100 * (s > HIGH_QUALITY_THRESHOLD).mean())
    high = high.rename("high").reset_index()
    table = group_intervals(valid, column, ["setting", by]).merge(high, on=["setting", by])
    interval = table.apply(lambda r: f" [{r['lo']:.2f}, {r['hi']:.2f}]" if finite_number(r["lo"]) is not None else "", axis=1)
    table["cell"] = table["mean"].map("{:.2f}".format) + interval + table["high"].map(" / {:.1f}%".format)
    return table.pivot(index="setting", columns=by, values="cell").reset_index()


def metric_breakdown(gens: pd.DataFrame, by: str) -> pd.DataFrame:
    if gens.empty or by not in gens:
        return pd.DataFrame()
    present = [m for m in at_avg_names() if m in gens]
    if not present:
        return pd.DataFrame()
    frame = gens.copy()
    for m in present:
        frame[m] = pd.to_numeric(frame[m], errors="coerce")
    frame["at_avg"] = frame[present].mean(axis=1)
    long = group_intervals(frame, "at_avg", ["setting", by])
    wide = long.pivot(index="setting", columns=by, values=["mean", "lo", "hi"])
    # One column per category, followed by its `_lo` and `_hi` (folded into `mean [lo, hi]` for markdown).
    table = pd.DataFrame({"setting": wide.index})
    for category in sorted(long[by].unique()):
        for stat, column in zip(("mean", "lo", "hi"), with_interval(str(category)), strict=True):
            table[column] = wide[(stat, category)].to_numpy()
    return table


def kendall_table(runs: pd.DataFrame, judge: str) -> pd.DataFrame:
    """System-level Kendall tau between each judge dimension and each metric (systems = cells)."""
    from scipy.stats import kendalltau

    runs = _cells(runs)
    rows = []
    for dimension in (*_dimensions(runs, judge), "qavg"):
        row: dict[str, Any] = {"dimension": dimension}
        judged = runs.get(metric_column(judge_key(judge, dimension)))
        for metric in _metrics(runs):
            values = runs.get(f"metrics.{metric}")
            if judged is None or values is None:
                row[metric] = np.nan
                continue
            mask = judged.notna() & values.notna()
            row[metric] = kendalltau(judged[mask], values[mask]).statistic if mask.sum() >= 3 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def judge_agreement(gens: pd.DataFrame, judges: list[str]) -> pd.DataFrame:
    """Pairwise agreement between judges on the same outputs: Spearman rho and quadratic kappa of QAvg (rounded)."""
    from scipy.stats import spearmanr

    rows = []
    for i, a in enumerate(judges):
        for b in judges[i + 1:]:
            ca, cb = judge_key(a, "qavg"), judge_key(b, "qavg")
            if ca not in gens or cb not in gens:
                continue
            pair = gens[[ca, cb]].apply(pd.to_numeric, errors="coerce").dropna()
            if len(pair) < 3:
                continue
            rho = spearmanr(pair[ca], pair[cb]).statistic
            kappa = cohen_kappa(pair[ca].round().astype(int).tolist(), pair[cb].round().astype(int).tolist(), weights="quadratic")
            rows.append({"judge_a": a, "judge_b": b, "n": len(pair), "spearman_rho": rho, "kappa_quadratic": kappa})
    return pd.DataFrame(rows)


def human_ratings(sweep: str, ratings_csv: str | Path | None, annotations_path: str | Path | None) -> pd.DataFrame:
    """The sweep's human ratings: from a CSV when given, else from the annotation store (when it exists)."""
    if ratings_csv is not None:
        dimensions = [d.key for d in load_rubric(HUMAN_RUBRIC).dimensions]
        rows = annotations.read_ratings_csv(ratings_csv, dimensions)
    else:
        return stored_ratings(sweep, experiment_of(NAME), annotations_path)
    return pd.DataFrame(rows)


def anchored_fills(ratings: pd.DataFrame, gens: pd.DataFrame, judge: str,
                   dimensions: Sequence[str]) -> AnchoredOutputs:
    """The fills of a sweep judged by `judge`, from the generations rows (a failed judgment has no score) and human
    ratings (rater, model, prompt_setting, instance_id, seed and the dimensions; several raters of one fill
    averaged), per model and setting, clustered by passage like the cell intervals."""
    return anchored_outputs(ratings, gens, judge, dimensions, ID_COLUMN, passage_of)


def anchored_sweep(sweep: str, data_sha256: str | None = None, ratings_csv: str | Path | None = None,
                   annotations_path: str | Path | None = None) -> list[AnchoredOutputs]:
    """The sweep's fills per judge with people's ratings so far (human_ratings), for a rating plan."""
    runs = tracking.report_cell_runs(experiment_of(NAME), sweep, data_sha256)
    gens, ratings = generations(runs), human_ratings(sweep, ratings_csv, annotations_path)
    return [anchored_fills(ratings, gens, judge, _dimensions(runs, judge)) for judge in _judges(runs)]


def _save_plot(draw, ylabel: str, title: str, path: Path) -> Path:
    """Draw one figure with `draw(ax)`, label it and save it as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    draw(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def figures(table: pd.DataFrame, judges: list[str], out_dir: Path) -> list[Path]:
    """High% per model as bars and QAvg per prompt setting as lines, one pair per judge."""
    written = []
    for judge in judges:
        high = table.groupby("model")[f"{judge}:high_pct"].mean()
        if high.notna().any():
            written.append(_save_plot(lambda ax: high.plot.bar(ax=ax, color="#4C72B0"), "High-quality completions (%)",
                                      f"High% per model (judge {judge})", out_dir / f"high_pct_{judge}.png"))
        lines = table.pivot_table(index="setting", columns="model", values=f"{judge}:qavg")
        if not lines.empty and lines.notna().any().any():
            written.append(_save_plot(lambda ax: lines.plot(ax=ax, marker="o"), "QAvg",
                                      f"QAvg per prompt setting (judge {judge})", out_dir / f"qavg_by_setting_{judge}.png"))
    return written


def reference_table(runs: pd.DataFrame, main: pd.DataFrame, judges: list[str], sweep: str, reference: str) -> pd.DataFrame:
    """The main table's rows, one per cell and judge, above the reference's rows, each with a note of its setup."""
    data = ", ".join(sorted({Path(str(p)).name for p in runs.get("params.data_path", pd.Series(dtype=str)).dropna()}))
    instances = int(runs["metrics.n_instances"].max()) if "metrics.n_instances" in runs else "?"
    note = f"{instances} instances of {data or 'its data'}, {_seed_count(runs)} seed(s), judge as named"
    return beside_reference(main, judges, sweep, note, load_reference(reference))


def comparison_tables(gens: pd.DataFrame, out_dir: Path, mde_target: float | None = None) -> dict[str, str]:
    """Paired Δ between settings (per model), between models (per setting) and, with several judges, between
    judges (per cell); the sweep's minimum detectable effect from the first two: paired_*, mde (CSV, md, LaTeX)."""
    by_setting, by_model = paired_settings(gens), paired_models(gens)
    comparisons = pd.concat([by_setting, by_model], ignore_index=True)
    detectable = mde_table(comparisons, n_instances=int(gens[ID_COLUMN].nunique()), target=mde_target)
    tables = {
        "Paired differences between prompt settings (Holm per model and metric)": _write(by_setting, out_dir, "paired_settings"),
        "Paired differences between models (Holm per setting and metric)": _write(by_model, out_dir, "paired_models"),
        "Minimum detectable effect (80% power, alpha 0.05)": _write(detectable, out_dir, "mde", "%.4f"),
        "Letter groups of models per setting (no shared letter: the difference holds)": _write(
            model_groups(gens, by_model), out_dir, "groups"),
    }
    if len(row_judges(gens)) > 1:
        tables["Paired QAvg differences between judges on the same outputs"] = _write(paired_judges(gens), out_dir, "paired_judges")
    return tables


def write_infilling_report(
    sweep: str, out_dir: str | Path, *, ratings_csv: str | Path | None = None, annotations_path: str | Path | None = None,
    data_sha256: str | None = None, mde_target: float | None = None, reference: str | None = None,
    alt_test_epsilon: float = EPSILON,
) -> dict[str, str]:
    """Write every table kind the sweep supports into out_dir; return title -> markdown.

    Only the cells on `data_sha256` are read when it is given (a sweep name reused on other data holds both).
    `reference` (data/reference/<name>, e.g. `published`, or a CSV) adds main_reference (published rows beside
    the main table); `mde_target` (a ΔAtAvg or ΔQAvg) adds to mde.csv the instances needed to detect it.
    Human ratings come from `ratings_csv` when given, else from the annotation store at `annotations_path`
    (default: the app's store); with none, the human-agreement table is left out. `alt_test_epsilon` is the
    alternative annotator test's cost margin (alt_test_<judge>).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = tracking.report_cell_runs(experiment_of(NAME), sweep, data_sha256)
    judges = _judges(runs)
    tables: dict[str, str] = {}
    main = main_table(runs)
    tables["Main results (model x setting)"] = _write(main, out_dir, "main")
    if reference is not None:
        tables["Main results beside the published rows"] = _write(reference_table(runs, main, judges, sweep, reference),
                                                                  out_dir, "main_reference")
    tables["AtAvg per model x prompt setting"] = _write(pivot(runs, "at_avg"), out_dir, "at_avg")
    if _seed_count(runs) > 1:
        tables["Seed variance (mean ± SD across seeds)"] = _write(seed_table(runs), out_dir, "seeds")
    if judges:
        for judge in judges:
            tables[f"QAvg per model x prompt setting [{judge}]"] = _write(pivot(runs, judge_key(judge, "qavg")), out_dir,
                                                                          f"qavg_{judge}")
            tables[f"Kendall tau, judge dimension vs metric [{judge}]"] = _write(kendall_table(runs, judge), out_dir, f"kendall_{judge}")
    gens = generations(runs)
    if len(judges) > 1:
        tables["Judge sensitivity (QAvg per judge)"] = _write(judge_table(runs), out_dir, "judges")
        agreement = judge_agreement(gens, judges)
        if not agreement.empty:
            tables["Agreement between judges"] = _write(agreement, out_dir, "judge_agreement")
    for by in ("position", "domain"):
        table = metric_breakdown(gens, by)
        if not table.empty:
            tables[f"AtAvg by {by}"] = _write(table, out_dir, f"at_avg_by_{by}")
        for judge in judges:
            table = breakdown(gens, by, judge)
            if not table.empty:
                tables[f"Avg / High% by {by} [{judge}]"] = _write(table, out_dir, f"{by}_{judge}")
    if not gens.empty:
        tables.update(comparison_tables(gens, out_dir, mde_target))
        tables.update(high_quality_tables(gens, runs, judges, out_dir, _write))
    ratings = human_ratings(sweep, ratings_csv, annotations_path)
    with_people: dict[str, float] = {}
    if not ratings.empty and not gens.empty:
        for judge in judges:
            table = human_agreement_table(ratings, gens, judge, _dimensions(runs, judge))
            with_people[judge] = human_rho(table, judge)
            tables[f"Human-human (kappa) and human-judge (Spearman rho) agreement [{judge}]"] = _write(table, out_dir, f"human_agreement_{judge}")
            anchored = anchored_fills(ratings, gens, judge, _dimensions(runs, judge)).table()
            tables[f"Judge-only, human-only and prediction-powered means [{judge}]"] = _write(anchored, out_dir, f"ppi_{judge}")
            alternative = alt_test(ratings, gens, judge, _dimensions(runs, judge), ID_COLUMN, alt_test_epsilon)
            tables[f"Alternative annotator test, epsilon {alt_test_epsilon:g} [{judge}]"] = _write(
                alternative, out_dir, f"alt_test_{judge}")
    figures(main, judges, out_dir)
    noise, numbers = judge_numbers(experiment_of(NAME), sweep, data_sha256, out_dir, gens, ID_COLUMN)
    for judge, rho in with_people.items():
        numbers.setdefault(judge, {})["human_rho"] = rho
    juries = write_weighted_juries(gens, weighed_with_people(logged_weights(experiment_of(NAME), sweep, data_sha256),
                                                             with_people), ("model", "setting"), out_dir)
    tables = with_judge_checks({**tables, **noise, **juries}, logged_rows(experiment_of(NAME), sweep, data_sha256),
                               out_dir, numbers=numbers)
    (out_dir / "tables.json").write_text(json.dumps(tables, indent=1, ensure_ascii=False))
    return tables
