"""Samples of high-quality fills (the study's Table 17): fills a judge rated above 4, best first, with passage."""

from __future__ import annotations

import pandas as pd

from narrative_eval.studies.infilling.report_samples import high_quality_fills, high_quality_tables


def gens() -> pd.DataFrame:
    return pd.DataFrame({
        "model": ["a", "a", "b", "b"], "setting": ["L0", "L2", "L0", "L2"], "instance_id": ["i1", "i2", "i1", "i2"],
        "seed": [0, 0, 0, 0], "domain": ["news", "wiki", "news", "wiki"], "gold": ["g1", "g2", "g1", "g2"],
        "answer": ["fa1", "fa2", "fb1", "fb2"],
        # exactly 4 is not above 4; a failed judgment (None, text) is never high quality
        "judge/j/qavg": [4.2, 4.0, 4.8, None], "judge/k/qavg": [None, "failed", 3.0, 2.0],
    })


def test_only_fills_above_four_best_first_with_their_passage():
    table = high_quality_fills(gens(), "j", {"i1": "The ______ rose.", "i2": "Rain ______ fell."})
    assert list(table["fill"]) == ["fb1", "fa1"]
    assert list(table["qavg"]) == [4.8, 4.2]
    assert list(table["passage"]) == ["The ______ rose.", "The ______ rose."]
    assert list(table["gold"]) == ["g1", "g1"]


def test_a_judge_with_no_high_fill_writes_no_table(tmp_path):
    written = []

    def write(table, out_dir, name):
        written.append((name, len(table)))
        return name

    tables = high_quality_tables(gens(), pd.DataFrame(), ["j", "k", "missing"], tmp_path, write)
    assert written == [("high_quality_j", 2)] and list(tables) == ["High-quality fills (judge average > 4) [j]"]
