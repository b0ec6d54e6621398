"""The creative-integrity report: the documented report files (docs/formats.md) with their columns, from score records."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from narrative_eval.reports.judge_checks import report_notes
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.reports.tables import missing_tables
from narrative_eval.studies.incremental.report import (
    CELL_SCORES_TITLE,
    DIAGNOSTIC_TITLES,
    PAIRED_TABLES,
    write_creative_report,
)
from narrative_eval.studies.incremental.score_records import load_score_records, save_score_records

REPORT_FILES = {
    "model_ci.csv": ["model", "full_ci", "sharded_ci", "icir", "icir_lo", "icir_hi", "n_pairs"],
    "cell_scores.csv": ["model", "condition", "judge", "n", "ci", "adherence", "note"],
    "paired_effects.csv": ["dimension", "n", "full", "sharded", "delta", "lo", "hi"],
    "equal_adherence.csv": ["dimension", "all_pairs_delta", "equal_adherence_delta", "n_pairs"],
    "equal_genre.csv": ["dimension", "delta", "lo", "hi"],
    "model_effects.csv": ["model", "dimension", "d_av"],
}
GENRES = ("fantasy", "historical_fiction", "mystery", "romance", "science_fiction", "comedy")

MISSING_ENTRY = ", ".join(PAIRED_TABLES) + " not written"
"""The report's entry for its paired tables when there is no pair: one entry, one reason."""


def simulate(conditions=("full", "sharded"), judges=("j1",), models=("m1", "m2"), n_tasks=24, seed=0) -> list[ScoreRecord]:
    rng = np.random.default_rng(seed)
    records = []
    for t in range(n_tasks):
        genre = GENRES[t % len(GENRES)]
        story = f"{genre}_{t:03d}"
        for model in models:
            for offset, condition in enumerate(conditions):
                for judge in judges:
                    items = [float(rng.choice([0, 0.5, 1], p=[0.1 + 0.1 * offset, 0.2, 0.7 - 0.1 * offset])) for _ in range(4)]
                    quality = {dim: int(rng.integers(max(1, 3 - offset), 6)) for dim in ("craft", "structure_coherence", "originality", "genre_effectiveness")}
                    quality["characterization"] = None if t % 5 == 0 else int(rng.integers(1, 6))
                    records.append(
                        ScoreRecord(
                            record_id=f"{model}/{condition}/{story}/{judge}", story_id=story, genre=genre, model=model,
                            condition=condition, judge=judge,
                            adherence=[{"constraint_id": f"c{k}", "score": s} for k, s in enumerate(items)], quality=quality,
                        )
                    )
    return records


def read(path):
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def test_report_writes_every_product_file_with_its_columns(tmp_path):
    tables = write_creative_report(simulate(), tmp_path, n_boot=1000, seed=0)
    for name, columns in REPORT_FILES.items():
        header, rows = read(tmp_path / name)
        assert header == columns, name
        assert rows, name
    header, rows = read(tmp_path / "model_ci.csv")
    assert [r[0] for r in rows] == ["m1", "m2", "ALL"]
    for row in rows:
        icir, lo, hi = map(float, row[3:6])
        assert lo <= icir <= hi
        assert float(row[3]) == pytest.approx(100 * float(row[2]) / float(row[1]), rel=1e-4)
    _, effects = read(tmp_path / "paired_effects.csv")
    assert [r[0] for r in effects] == ["adherence", "craft", "structure_coherence", "originality", "genre_effectiveness", "characterization"]
    assert int(effects[-1][1]) < int(effects[0][1])  # characterization N/A in some pairs
    _, d_rows = read(tmp_path / "model_effects.csv")
    assert len(d_rows) == 2 * 6
    png = (tmp_path / "model_effects.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "icir_by_condition.csv").exists()
    assert any("ICIR" in title for title in tables)
    assert all(markdown.startswith("|") for markdown in tables.values())


def test_same_seed_same_report(tmp_path):
    records = simulate()
    write_creative_report(records, tmp_path / "a", n_boot=500, seed=3)
    write_creative_report(records, tmp_path / "b", n_boot=500, seed=3)
    for name in REPORT_FILES:
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_replanning_conditions_get_their_icir(tmp_path):
    records = simulate(conditions=("full", "sharded", "recap", "snowball"))
    tables = write_creative_report(records, tmp_path, n_boot=500)
    header, rows = read(tmp_path / "icir_by_condition.csv")
    assert header == ["condition", "model", "full_ci", "ci", "icir", "icir_lo", "icir_hi"]
    assert sorted({r[0] for r in rows}) == ["recap", "sharded", "snowball"]
    assert any(title.startswith("ICIR of every condition") for title in tables)
    # The main files can compare FULL with another condition.
    write_creative_report(records, tmp_path / "recap", n_boot=200, comparison="recap")
    header, _ = read(tmp_path / "recap" / "model_ci.csv")
    assert header == ["model", "full_ci", "recap_ci", "icir", "icir_lo", "icir_hi", "n_pairs"]


def test_judge_panel_is_reported_per_judge(tmp_path):
    records = simulate(judges=("alpha", "beta"))
    tables = write_creative_report(records, tmp_path, n_boot=200, judge="beta")
    assert all("(judge beta)" in title for title in tables
               if title not in [*DIAGNOSTIC_TITLES.values(), CELL_SCORES_TITLE])
    assert set(DIAGNOSTIC_TITLES.values()) <= set(tables)  # written once, judge-independent
    assert not (tmp_path / "by_judge" / "alpha" / "task_composition.csv").exists()
    for judge in ("alpha", "beta"):
        for name in REPORT_FILES:
            assert (tmp_path / "by_judge" / judge / name).is_file() or name == "cell_scores.csv"
    assert (tmp_path / "model_ci.csv").read_text() == (tmp_path / "by_judge" / "beta" / "model_ci.csv").read_text()


def test_report_command_from_an_imported_score_file(tmp_path, capsys):
    from experiments.report import main as report_main

    path = save_score_records(simulate(n_tasks=12), tmp_path / "scores.jsonl")
    out = tmp_path / "out"
    assert report_main(["creative-integrity", "--scores", str(path), "--out", str(out), "--resamples", "200"]) == 0
    for name in REPORT_FILES:
        assert (out / name).is_file(), name
    direct = write_creative_report(load_score_records(path), tmp_path / "direct", n_boot=200)
    assert (out / "model_ci.csv").read_text() == (tmp_path / "direct" / "model_ci.csv").read_text()
    printed = capsys.readouterr().out
    assert all(title in printed for title in direct) and f"written to {out}/" in printed


def test_missing_condition_is_explained(tmp_path):
    """No SHARDED record: the paired tables are recorded as missing with why, the others written."""
    tables = write_creative_report(simulate(conditions=("full",)), tmp_path, n_boot=200)
    assert "no scored SHARDED story to compare (conditions scored: FULL)" in tables[MISSING_ENTRY]
    assert set(missing_tables(tmp_path)) == set(PAIRED_TABLES)
    assert (tmp_path / "cell_scores.csv").is_file() and not (tmp_path / "model_ci.csv").exists()


def test_records_without_a_matched_pair_make_an_incomplete_report_that_says_why(tmp_path, capsys):
    """FULL scored on one story, SHARDED on another (the embedded sweep with --limit 2, whose other replies were cut):
    no pair, so no paired table; the report is written, the stale tables of an earlier complete report in the same
    folder are removed, the catalog keeps each missing table's place with why, and the report command prints it."""
    from experiments.report import main as report_main
    from narrative_eval.reports.catalog import report_tables

    complete = simulate(n_tasks=12)
    write_creative_report(complete, tmp_path, n_boot=200)
    assert (tmp_path / "model_ci.csv").is_file() and not missing_tables(tmp_path)
    unpaired = [r for r in complete if r.model == "m1" and (r.condition, r.story_id) in
                {("full", "fantasy_000"), ("sharded", "historical_fiction_001")}]
    tables = write_creative_report(unpaired, tmp_path, n_boot=200)
    why = tables[MISSING_ENTRY]
    assert why.startswith("> Not written: no matched FULL/SHARDED pair") and "m1: no story scored under both" in why
    for name in PAIRED_TABLES:
        assert not any((tmp_path / f"{name}{suffix}").exists() for suffix in (".csv", ".md", ".tex", ".png")), name
    found = {t.name: t for t in report_tables(tmp_path)}
    assert found["model_ci"].missing.startswith("no matched FULL/SHARDED pair") and not found["cell_scores"].missing
    assert list(found)[0] == "model_ci"  # in its place: the study's main table first
    path = save_score_records(unpaired, tmp_path / "scores.jsonl")
    out = tmp_path / "out"
    assert report_main(["creative-integrity", "--scores", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"## {MISSING_ENTRY}\n> Not written: no matched FULL/SHARDED pair" in printed
    assert "incomplete report: 7 table(s) not written (model_ci, paired_effects, " in printed


def test_runs_all_stories_and_the_reports_matched_pairs_each_say_which_with_their_n(tmp_path):
    """Runs showed Creative Integrity 0.125 for gemma3/full (its run's judge/<judge>/ci: every story it scored) and
    Figures 0.000 (model_ci.csv: only the stories with a SHARDED counterpart). Both stay, each with its n: the per-cell
    table gives the run's numbers, model_ci its pairs; a model without a pair is said under the table, with why."""
    import pandas as pd

    from narrative_eval.studies.incremental.effects import adherence_of, creative_integrity
    from narrative_eval.studies.incremental.report import unscored_cells

    records = simulate(models=("gemma3",), n_tasks=2)
    dropped = records.pop(1)  # the first story's SHARDED record: its judge failed on it
    assert dropped.condition == "sharded"
    runs = pd.DataFrame([{"params.model_id": "smollm2", "params.prompt_setting": "default", "params.condition": c,
                          "metrics.scored_rate": 1.0, "metrics.judge/j1/failure_rate": 1.0,
                          "metrics.judge/j1/checklist_failure_rate": 1.0} for c in ("full", "sharded")])
    unscored = unscored_cells(runs, records)
    tables = write_creative_report(records, tmp_path, n_boot=200, unscored=unscored)
    cells = pd.read_csv(tmp_path / "cell_scores.csv")
    full = cells[(cells["model"] == "gemma3") & (cells["condition"] == "full")].iloc[0]
    assert full["n"] == 2
    every_story = [creative_integrity(adherence_of(r), r.quality["structure_coherence"]) for r in records
                   if r.condition == "full"]
    assert full["ci"] == pytest.approx(np.mean(every_story), abs=1e-5)
    pairs = pd.read_csv(tmp_path / "model_ci.csv")
    assert pairs.loc[pairs["model"] == "gemma3", "n_pairs"].item() == 1
    assert list(cells.loc[cells["model"] == "smollm2", "note"]) == ["j1's checklist failed on every story"] * 2
    assert cells.loc[cells["model"] == "smollm2", "n"].tolist() == [0, 0]
    title = next(t for t in tables if t.startswith("Creative Integrity and ICIR"))
    why = "smollm2: no matched pair (no scored FULL or SHARDED story; j1's checklist failed on every story)."
    assert f"- {why}" in tables[title]
    assert f"- {why}" in report_notes(tmp_path / "model_ci.md")  # what the app's Figures tab shows under the table
