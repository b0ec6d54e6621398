"""The creative-integrity report's diagnostics: the study's Table 1 (task_composition) and Figure 3
(length_diagnostics), by hand on small inputs, from score records alone and from a sweep's runs in MLflow."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from narrative_eval.data.files import file_sha256
from narrative_eval.studies.incremental.records import Constraint, ScoreRecord, WritingTask
from narrative_eval.studies.incremental.report import DIAGNOSTIC_TITLES, write_creative_report
from narrative_eval.studies.incremental.report_diagnostics import (
    COMPOSITION_COLUMNS,
    LENGTH_COLUMNS,
    RECORDS_LENGTH_NOTE,
    draw_length_diagnostics,
    length_diagnostics,
    records_inputs,
    task_composition,
    task_frame,
)
from narrative_eval.studies.incremental.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]
TASKS_JSON = REPO / "data" / "creative" / "tasks.json"
CONSTRAINTS = REPO / "data" / "creative" / "constraints.jsonl"
PNG = b"\x89PNG\r\n\x1a\n"


def task(domain: str, item_id: int, n_constraints: int, n_shards: int) -> WritingTask:
    return WritingTask(
        domain=domain, item_id=item_id, title="t", full_instruction="x",
        shards=tuple(f"shard {k}" for k in range(n_shards)),
        constraints=tuple(Constraint(constraint_id=f"c{k}", type="plot", requirement="r", introduced_at_shard=0)
                          for k in range(n_constraints)),
    )


def record(model, condition, story, seed, judge, n_items=2) -> ScoreRecord:
    quality = {"craft": 3, "structure_coherence": 4, "originality": 3, "genre_effectiveness": 3, "characterization": None}
    return ScoreRecord(record_id=f"{model}/{condition}/{story}/seed{seed}/{judge}", story_id=story,
                       genre=story.rsplit("_", 1)[0], model=model, condition=condition, judge=judge,
                       adherence=[{"constraint_id": f"c{k}", "score": 1.0} for k in range(n_items)], quality=quality)


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def by_key(table: pd.DataFrame, *keys: str) -> dict:
    return {tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]: row for row in table.to_dict("records")}


def test_task_composition_by_hand():
    tasks = task_frame([task("fantasy", 1, 3, 5), task("fantasy", 2, 5, 7), task("comedy", 1, 2, 9)])
    responses = pd.DataFrame(
        [{"model": m, "condition": c, "story_id": s, "genre": s.rsplit("_", 1)[0], "seed": seed, "n_judges": 2}
         for m in ("m1", "m2") for c in ("full", "sharded") for s in ("fantasy_001", "fantasy_002", "comedy_001")
         for seed in (0, 1)]
        + [{"model": "m1", "condition": "recap", "story_id": "fantasy_001", "genre": "fantasy", "seed": seed,
            "n_judges": 2} for seed in (0, 1)]
    )
    table = task_composition(tasks, responses)
    assert list(table.columns) == list(COMPOSITION_COLUMNS)
    assert list(table["genre"]) == ["fantasy", "comedy", "ALL"]  # the study's genre order, then the total
    rows = by_key(table, "genre")
    # fantasy: 2 tasks, 3 + 5 items, 5 and 7 shards; (task, condition) = 2 x 2 + recap of one = 5 variants;
    # responses 2 tasks x 2 models x 2 conditions x 2 seeds + 2 recap seeds = 18; pairs (task, model) with
    # FULL and sharded: 4, with FULL and recap: 1; judge calls 2 per response and judge: 2 x 2 x 18.
    assert {k: rows["fantasy"][k] for k in COMPOSITION_COLUMNS[1:-1]} == {
        "n_tasks": 2, "n_constraints": 8, "constraints_per_task": 4.0, "shards_mean": 6.0, "shards_min": 5.0,
        "shards_max": 7.0, "delivery_variants": 5, "responses": 18, "matched_pairs": 5, "judge_calls": 72}
    assert {k: rows["comedy"][k] for k in COMPOSITION_COLUMNS[1:-1]} == {
        "n_tasks": 1, "n_constraints": 2, "constraints_per_task": 2.0, "shards_mean": 9.0, "shards_min": 9.0,
        "shards_max": 9.0, "delivery_variants": 2, "responses": 8, "matched_pairs": 2, "judge_calls": 32}
    total = rows["ALL"]
    assert total["constraints_per_task"] == pytest.approx(10 / 3)
    assert (total["n_tasks"], total["shards_mean"], total["shards_min"], total["shards_max"]) == (3, 7.0, 5.0, 9.0)
    assert (total["delivery_variants"], total["responses"], total["matched_pairs"], total["judge_calls"]) == (7, 26, 7, 104)


def test_the_studys_table_1_scale_from_its_design():
    """160 tasks (20 per genre, 60 comedy) x 6 models x FULL/SHARDED x 1 seed: the study's Table 1."""
    counts = {"fantasy": 20, "historical_fiction": 20, "mystery": 20, "romance": 20, "science_fiction": 20, "comedy": 60}
    tasks = task_frame([task(g, i, 4, 6) for g, n in counts.items() for i in range(n)])
    responses = pd.DataFrame([{"model": f"m{m}", "condition": c, "story_id": s, "genre": g, "seed": 0, "n_judges": 1}
                              for s, g in zip(tasks["story_id"], tasks["genre"]) for m in range(6) for c in ("full", "sharded")])
    rows = by_key(task_composition(tasks, responses), "genre")
    published = {"fantasy": (20, 40, 240, 120), "comedy": (60, 120, 720, 360), "ALL": (160, 320, 1920, 960)}
    for genre, numbers in published.items():
        row = rows[genre]
        assert (row["n_tasks"], row["delivery_variants"], row["responses"], row["matched_pairs"]) == numbers


def test_records_alone_give_tasks_and_scale_but_no_lengths():
    records = [
        record("m1", "full", "fantasy_001", 0, "j1", 3), record("m1", "full", "fantasy_001", 1, "j1", 3),
        record("m1", "full", "fantasy_001", 0, "j2", 3), record("m1", "sharded", "fantasy_001", 0, "j1", 3),
        record("m1", "sharded", "fantasy_001", 0, "j2", 3), record("m1", "full", "comedy_001", 0, "j1", 1),
    ]
    inputs = records_inputs(records)
    table = task_composition(inputs.tasks, inputs.responses, inputs.task_note)
    rows = by_key(table, "genre")
    # fantasy: responses (full, seeds 0 and 1) and (sharded, seed 0), one pair; 5 records = 5 x 2 judge calls.
    fantasy = rows["fantasy"]
    assert (fantasy["n_tasks"], fantasy["n_constraints"], fantasy["delivery_variants"], fantasy["responses"],
            fantasy["matched_pairs"], fantasy["judge_calls"]) == (1, 3, 2, 3, 1, 10)
    assert math.isnan(fantasy["shards_mean"]) and "shards unknown" in fantasy["note"]
    total = rows["ALL"]
    assert (total["n_tasks"], total["n_constraints"], total["responses"], total["matched_pairs"], total["judge_calls"]) == (2, 4, 4, 1, 12)
    lengths = by_key(length_diagnostics(inputs.finals, inputs.length_note), "model", "condition")
    assert lengths[("m1", "full")]["n"] == 3 and lengths[("m1", "sharded")]["n"] == 1
    for row in lengths.values():
        assert math.isnan(row["words_mean"]) and math.isnan(row["prompt_tokens_mean"]) and row["prompt_tokens_n"] == 0
        assert row["note"] == RECORDS_LENGTH_NOTE


def test_length_diagnostics_by_hand(tmp_path):
    finals = pd.DataFrame([
        {"model": "m1", "condition": "sharded", "reply": "Hello,  world!\n\nNew para.", "prompt_tokens": 300},
        {"model": "m1", "condition": "full", "reply": "one two three", "prompt_tokens": 100},
        {"model": "m1", "condition": "full", "reply": "a b c d e", "prompt_tokens": 120},
        {"model": "m1", "condition": "full", "reply": "x", "prompt_tokens": 0},  # the backend reported no tokens
        {"model": "m0", "condition": "full", "reply": "only me", "prompt_tokens": 50},
    ])
    table = length_diagnostics(finals)
    assert list(table.columns) == list(LENGTH_COLUMNS)
    assert list(zip(table["model"], table["condition"])) == [("m0", "full"), ("m1", "full"), ("m1", "sharded")]
    rows = by_key(table, "model", "condition")
    full = rows[("m1", "full")]
    # words 3, 5, 1: mean 3, sample variance (0 + 4 + 4) / 2 = 4, median 3; tokens 100, 120: sd sqrt(200).
    assert (full["n"], full["words_mean"], full["words_sd"], full["words_median"]) == (3, 3.0, 2.0, 3.0)
    assert (full["prompt_tokens_n"], full["prompt_tokens_mean"], full["prompt_tokens_median"]) == (2, 110.0, 110.0)
    assert full["prompt_tokens_sd"] == pytest.approx(math.sqrt(200))
    assert full["note"] == "no prompt tokens reported for 1 of 3 stories"
    sharded = rows[("m1", "sharded")]
    assert (sharded["n"], sharded["words_mean"], sharded["words_median"], sharded["prompt_tokens_mean"]) == (1, 4.0, 4.0, 300.0)
    assert math.isnan(sharded["words_sd"]) and sharded["note"] == ""  # one story has no sd
    assert draw_length_diagnostics(table, tmp_path / "lengths.png")
    assert (tmp_path / "lengths.png").read_bytes()[:8] == PNG
    unknown = length_diagnostics(finals.assign(reply=None, prompt_tokens=float("nan")), "no text")
    assert not draw_length_diagnostics(unknown, tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def test_report_from_score_records_writes_both_files(tmp_path):
    records = [record(m, c, f"{g}_00{i}", 0, "j1") for m in ("m1", "m2") for c in ("full", "sharded")
               for g in ("fantasy", "comedy") for i in (1, 2)]
    tables = write_creative_report(records, tmp_path, n_boot=100)
    composition = rows_of(tmp_path / "task_composition.csv")
    assert list(composition[0]) == list(COMPOSITION_COLUMNS)
    assert [r["genre"] for r in composition] == ["fantasy", "comedy", "ALL"]
    assert composition[-1]["responses"] == "16" and composition[-1]["shards_mean"] == ""
    lengths = rows_of(tmp_path / "length_diagnostics.csv")
    assert list(lengths[0]) == list(LENGTH_COLUMNS) and len(lengths) == 4
    assert all(r["n"] == "4" and r["words_mean"] == "" and r["note"] == RECORDS_LENGTH_NOTE for r in lengths)
    assert not (tmp_path / "length_diagnostics.png").exists()  # nothing to draw
    for name in ("task_composition", "length_diagnostics"):
        assert (tmp_path / f"{name}.md").read_text().startswith("| ")
        assert "\\begin{tabular}" in (tmp_path / f"{name}.tex").read_text()
    assert set(DIAGNOSTIC_TITLES.values()) <= set(tables)


def log_cell(experiment, parent, spec, condition, data_path, conversations, records):
    """A finished incremental-delivery cell run written straight into MLflow through tracking.log_cell."""
    from narrative_eval import tracking
    from narrative_eval.records import CellSpec, GenerationParams, JudgeSpec
    from narrative_eval.study import CellResult

    cell = CellSpec(study="incremental-delivery", sweep=parent[1], model=spec, prompt_setting="default",
                    condition=condition, seeds=(0, 1), generation=GenerationParams(), limit=2,
                    judges=(JudgeSpec(id="j1", model=spec),), data_path=str(data_path),
                    data_sha256=file_sha256(data_path))
    run_id = tracking.start_cell_run(experiment, cell, parent[0])
    tracking.log_cell(run_id, cell, CellResult(tables={"conversations.json": conversations},
                                               artifacts={"score_records.json": [r.model_dump(mode="json") for r in records]}))


def turn_rows(condition: str, replies: dict[tuple[str, int], tuple[str, int]]) -> list[dict]:
    """Conversation rows: a non-final first turn, then the final reply with its prompt tokens."""
    rows = []
    for (story, seed), (reply, tokens) in replies.items():
        rows.append({"story_id": story, "condition": condition, "seed": seed, "turn": 0, "final": condition == "full",
                     "reply": reply if condition == "full" else "draft words here", "prompt_tokens": tokens if condition == "full" else 40})
        if condition != "full":
            rows.append({"story_id": story, "condition": condition, "seed": seed, "turn": 1, "final": True,
                         "reply": reply, "prompt_tokens": tokens})
    return rows


def test_sweep_report_reads_the_cells_tasks_and_conversations(tmp_path, smollm2_spec, monkeypatch, capsys):
    """A sweep's cells written into MLflow (no model run): Table 1 from the cells' task file and grid, Figure 3
    from their conversations tables; a task file changed since is reported and the records stand in."""
    from experiments.report import main as report_main

    from narrative_eval import tracking
    from narrative_eval.study import experiment_of

    monkeypatch.setenv("NARRATIVE_EVAL_TRACES", "0")
    data = tmp_path / "tasks.json"
    shutil.copy(TASKS_JSON, data)
    shutil.copy(CONSTRAINTS, tmp_path / "constraints.jsonl")
    experiment = experiment_of("incremental-delivery")
    sweep = f"diagnostics-{tmp_path.name}"
    parent = (tracking.start_sweep_run(experiment, sweep, {"sweep": sweep}), sweep)
    stories = ("fantasy_001", "fantasy_002")
    replies = {
        "full": {(stories[0], 0): ("one two", 100), (stories[1], 0): ("one two three four", 110),
                 (stories[0], 1): ("a b c", 100), (stories[1], 1): ("a b c d e f g", 110)},
        "sharded": {(stories[0], 0): ("w " * 10, 900), (stories[1], 0): ("w " * 20, 1000)},  # seed 1 truncated
    }
    for condition, by_story in replies.items():
        records = [record("smollm2", condition, s, seed, "j1") for s, seed in by_story]
        log_cell(experiment, parent, smollm2_spec, condition, data, turn_rows(condition, by_story), records)
    tracking.end_run(parent[0])

    out = tmp_path / "out"
    assert report_main(["creative-integrity", "--sweep", sweep, "--out", str(out), "--resamples", "100"]) == 0
    assert DIAGNOSTIC_TITLES["length_diagnostics"] in capsys.readouterr().out
    checklists = {t.story_id: len(t.constraints) for t in load_tasks(TASKS_JSON, CONSTRAINTS)}
    total = rows_of(out / "task_composition.csv")[-1]
    assert [total[k] for k in ("genre", "n_tasks", "n_constraints", "shards_min", "shards_max", "note")] == [
        "ALL", "2", str(checklists[stories[0]] + checklists[stories[1]]), "7.0", "7.0", ""]
    # The grid's planned responses: 2 tasks x 2 conditions x 2 seeds, one judge; pairs (task, model): 2.
    assert [total[k] for k in ("delivery_variants", "responses", "matched_pairs", "judge_calls")] == ["4", "8", "2", "16"]
    lengths = {r["condition"]: r for r in rows_of(out / "length_diagnostics.csv")}
    assert [lengths["full"][k] for k in ("model", "n", "words_mean", "words_median", "prompt_tokens_mean")] == [
        "smollm2", "4", "4.0", "3.5", "105.0"]
    assert float(lengths["full"]["words_sd"]) == pytest.approx(2.160247, abs=1e-6)  # sd of 2, 4, 3, 7
    assert [lengths["sharded"][k] for k in ("n", "words_mean", "prompt_tokens_mean", "prompt_tokens_sd")] == [
        "2", "15.0", "950.0", str(round(math.sqrt(5000), 6))]
    assert (out / "length_diagnostics.png").read_bytes()[:8] == PNG

    data.write_text(data.read_text() + "\n")  # the task file changed since the sweep ran
    assert report_main(["creative-integrity", "--sweep", sweep, "--out", str(tmp_path / "again"), "--resamples", "100"]) == 0
    total = rows_of(tmp_path / "again" / "task_composition.csv")[-1]
    assert total["note"] == f"{data} changed since the sweep ran: tasks read from score records, shards unknown"
    assert (total["n_tasks"], total["responses"], total["shards_mean"]) == ("2", "6", "")  # the scored responses
    assert (tmp_path / "again" / "length_diagnostics.csv").read_text() == (out / "length_diagnostics.csv").read_text()


@pytest.mark.slow
def test_lengths_of_real_conversations(tmp_path, smollm2, smollm2_spec, monkeypatch):
    """Cells of the real embedded model (two-token replies, kept as final, no judge) logged into MLflow: the
    table counts the words of each final reply and takes llama.cpp's prompt tokens of its final turn."""
    pytest.importorskip("llama_cpp")
    from narrative_eval import tracking
    from narrative_eval.backends.cache import CachedBackend
    from narrative_eval.records import CellSpec, GenerationParams
    from narrative_eval.studies.incremental.report import creative_report_from_sweep
    from narrative_eval.study import Runtime, experiment_of
    from narrative_eval.studies.incremental import IncrementalDeliveryStudy

    monkeypatch.setenv("NARRATIVE_EVAL_TRACES", "0")
    experiment = experiment_of("incremental-delivery")
    sweep = f"real-lengths-{tmp_path.name}"
    parent = tracking.start_sweep_run(experiment, sweep, {"sweep": sweep})
    runtime = Runtime(backend_for=lambda spec: CachedBackend(smollm2, None))
    finals = {}
    for condition in ("full", "sharded"):
        cell = CellSpec(study="incremental-delivery", sweep=sweep, model=smollm2_spec, prompt_setting="default",
                        condition=condition, generation=GenerationParams(temperature=0.0, max_new_tokens=2),
                        data_path=str(TASKS_JSON), data_sha256=file_sha256(TASKS_JSON), limit=1,
                        extra={"score_truncated": True})
        result = IncrementalDeliveryStudy().run_cell(cell, runtime)
        finals[condition] = [r for r in result.tables["conversations.json"] if r["final"]]
        # What a judge makes of two-token stories is not tested here: the cell's score record is written by hand.
        result.artifacts["score_records.json"] = [record("smollm2", condition, "fantasy_001", 0, "j1").model_dump(mode="json")]
        tracking.log_cell(tracking.start_cell_run(experiment, cell, parent), cell, result)
    tracking.end_run(parent)

    creative_report_from_sweep(sweep, tmp_path / "out", n_boot=50)
    lengths = {r["condition"]: r for r in rows_of(tmp_path / "out" / "length_diagnostics.csv")}
    for condition, (final,) in finals.items():
        row = lengths[condition]
        assert (row["model"], row["n"], row["prompt_tokens_n"]) == ("smollm2", "1", "1")
        assert float(row["words_mean"]) == len(final["reply"].split())
        assert float(row["prompt_tokens_mean"]) == final["prompt_tokens"] > 0
    # SHARDED's final turn carries the six exchanges before it.
    assert float(lengths["sharded"]["prompt_tokens_mean"]) > float(lengths["full"]["prompt_tokens_mean"])
    total = rows_of(tmp_path / "out" / "task_composition.csv")[-1]
    assert [total[k] for k in ("n_tasks", "shards_mean", "responses", "matched_pairs", "judge_calls")] == ["1", "7.0", "2", "1", "0"]


def test_formats_doc_lists_the_columns_written():
    documented = {}
    for line in (REPO / "docs" / "formats.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith(("`task_composition.csv`", "`length_diagnostics.csv`")):
            documented[cells[0].split("`")[1]] = [c.strip() for c in cells[1].split(",")]
    assert documented == {"task_composition.csv": list(COMPOSITION_COLUMNS), "length_diagnostics.csv": list(LENGTH_COLUMNS)}
