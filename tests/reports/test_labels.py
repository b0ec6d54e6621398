"""The one label map the app and the reports share: names read from the metrics registry, the rubric files, the
platform's tables.yaml and each study's presentation, and the Runs tab's column sets."""

from __future__ import annotations

import pandas as pd
import pytest

from narrative_eval.judges import load_rubric
from narrative_eval.metrics import METRICS, Metric, metric
from narrative_eval.reports.labels import (OTHER_SET, column_set_names, column_set_of, label, label_map, labels,
                                           sweep_rubrics)
from narrative_eval.reports.tables import readable
from narrative_eval.studies import incremental, infilling
from narrative_eval.studies.infilling.vocabulary import RUBRIC
from narrative_eval.study import load_study


def test_metric_labels_come_from_the_registry():
    for entry in METRICS.entries():
        assert label(entry.name) == entry.meta["label"]
    assert [label(n) for n in ("bertscore", "rouge1", "meteor", "chrf", "semf1")] == [
        "BERTScore", "ROUGE-1", "METEOR", "chrF", "Sem-F1"]


def test_a_plugin_metric_reads_under_its_own_label():
    @metric("word_share", label="Word share")
    class WordShare(Metric):
        def _score_nonblank(self, candidates, references):
            return [0.0] * len(candidates)

    label_map.cache_clear()
    try:
        assert label("word_share") == "Word share" and label("word_share_lo") == "Word share low"
    finally:
        METRICS.remove("word_share")
        label_map.cache_clear()


def test_judge_numbers_read_as_judge_then_number():
    assert label("at_avg") == "AtAvg"
    assert label("judge/smollm2-judge/qavg") == "smollm2-judge QAvg"
    assert label("judge/j/high_pct") == "j High%"
    assert label("smollm2-judge:high_pct") == "smollm2-judge High%"  # the infilling report's column form
    assert label("judge/j/qavg_sd") == "j QAvg SD"
    assert label("at_avg_lo") == "AtAvg low" and label("j:qavg_hi") == "j QAvg high"
    assert label("seed1/at_avg") == "AtAvg (seed 1)"
    assert label("QAvg[j]") == "QAvg (j)" and label("kappa[a|b]") == "κ (a vs b)"


def test_dimensions_read_as_their_rubric_names_them():
    for dimension in load_rubric(RUBRIC).dimensions:
        assert label(f"judge/j/{dimension.key}") == f"j {dimension.label}"


def test_a_dimension_reads_as_the_rubric_that_scored_it_names_it():
    """The continuation example's rubric and the infilling one both name a dimension `coherence`: each study's numbers
    read in its own rubric's words; without a rubric named, the shipped rubrics' words, the infilling study's, as
    before."""
    infilling_rubrics = load_study(infilling.NAME).own_rubrics()
    continuation_rubrics = load_study("continuation").own_rubrics()
    assert infilling_rubrics == (RUBRIC,) and continuation_rubrics == ("continuation_quality",)
    assert label("judge/j/coherence", continuation_rubrics) == "j Coherence with the opening"
    assert label("j:coherence_lo", continuation_rubrics) == "j Coherence with the opening low"  # a report column
    assert label("judge/j/coherence", infilling_rubrics) == "j Bidirectional Coherence"
    assert label("judge/j/coherence") == "j Bidirectional Coherence"
    assert label("judge/j/progression", infilling_rubrics) == "j Progression"  # a key only another rubric has
    # A report table: its dimension columns and a column of dimension names.
    table = pd.DataFrame({"dimension": ["coherence", "fluency"], "j:coherence": [3.0, 4.0]})
    shown = readable(table, continuation_rubrics)
    assert list(shown.columns) == ["Dimension", "j Coherence with the opening"]
    assert shown["Dimension"].tolist() == ["Coherence with the opening", "Fluency"]
    assert readable(table, infilling_rubrics)["Dimension"].tolist() == ["Bidirectional Coherence", "Fluency"]
    # A sweep's rubrics: those its cells logged (a judge naming another study's rubric; none where a run logged none,
    # and only registered ones), then the study's own.
    assert sweep_rubrics(load_study(infilling.NAME),
                         {"params.rubric": ["continuation_quality", float("nan")], "params.rubrics": ["gone,"]}) == (
        "continuation_quality", RUBRIC)
    assert sweep_rubrics(None) == ()


def test_each_study_brings_its_own_words():
    for study in (load_study(infilling.NAME), load_study(incremental.NAME)):
        for name, text in study.presentation().labels.items():
            assert label(name) == text, (study.name, name)
    assert label("judge/j/ci") == "j Creative Integrity"
    assert label("extraction_echo_rate") == load_study(infilling.NAME).presentation().labels["extraction_echo_rate"]


def test_prefixed_and_unknown_names_stay_readable():
    assert label("cost/usd_batch") == "Cost USD (batch)"
    assert label("pairwise/j/pairwise/failure_rate") == "Pairwise j/pairwise failures"
    assert label("some_new_number") == "Some new number"


def test_two_names_with_one_label_stay_apart():
    assert labels(["setting", "prompt_setting"]) == {"setting": "Setting", "prompt_setting": "Setting (prompt_setting)"}


@pytest.mark.parametrize(("name", "expected"), [
    ("judge/j/fluency", "Judge dimensions"),
    ("judge/j/failure_rate", "Judge failures and counts"),
    ("judge/j/checklist_failure_rate", "Judge failures and counts"),
    ("judge/j/qavg_sd", "Spread across seeds (SD)"),
    ("extraction_echo_rate", "Extraction"),
    ("prompt_tokens", "Requests, tokens and time"),
    ("cost/usd_batch", "Cost"),
    ("n_instances", "Counts"),
    ("something_else", OTHER_SET),
])
def test_every_logged_number_has_one_column_set(name, expected):
    assert column_set_of(name) == expected
    assert expected in column_set_names()
