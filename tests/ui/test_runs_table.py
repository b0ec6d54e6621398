"""The Runs table's layout without a browser: intervals folded into `mean [lo, hi]`, labels from the label map,
optional numbers in their sets, the CSV with numbers and bounds, the chart's legend beside its bars."""

from __future__ import annotations

import pandas as pd

from ui.runs import ALL_JUDGES, MEAN, available_sets, chart, metric_columns, runs_frame, runs_html


def _runs() -> pd.DataFrame:
    """Two cell runs as mlflow.search_runs returns them (one judge, intervals on the headlines)."""
    return pd.DataFrame({
        "run_id": ["a" * 32, "b" * 32], "experiment_id": ["1", "1"], "status": ["FINISHED", "FINISHED"],
        "params.model_id": ["m1", "m2"], "params.prompt_setting": ["L0", "L0"], "params.condition": ["standard"] * 2,
        "metrics.at_avg": [0.25, 0.3], "metrics.at_avg_lo": [0.2, 0.22], "metrics.at_avg_hi": [0.3, 0.38],
        "metrics.at_avg_sd": [0.0, 0.0], "metrics.judge/j/qavg": [3.2, 3.6], "metrics.judge/j/qavg_lo": [2.9, 3.1],
        "metrics.judge/j/qavg_hi": [3.5, 4.0], "metrics.judge/j/high_pct": [25.0, 50.0],
        "metrics.judge/j/fluency": [3.0, 4.0], "metrics.extraction_echo_rate": [0.5, 0.0],
        "metrics.cost/usd_sync": [0.0, 0.0], "tags.judge_check/j": ["fail: discrimination", "pass"],
    })


def test_the_default_view_shows_headlines_as_intervals_under_labels():
    table = runs_frame(_runs(), MEAN, ALL_JUDGES, study="infilling")
    assert list(table.columns) == ["model", "setting", "condition", "status", "AtAvg", "j QAvg", "j High%",
                                   "judge checks", "run id"]
    assert table.loc[0, "AtAvg"] == "0.250 [0.200, 0.300]" and table.loc[1, "j QAvg"] == "3.60 [3.10, 4.00]"
    assert table.loc[0, "j High%"] == "25.0"  # no interval logged: the mean alone, a percentage to one decimal
    # The row marks the judge; the warning with its checks is said once, over the table (judge_check_note).
    assert table.loc[0, "judge checks"] == "⚠ j failed (see above)" and table.loc[1, "judge checks"] == "passed"
    html = runs_html(table)
    assert "<span class='ci'>[0.200, 0.300]</span>" in html and "title='at_avg'" in html


def test_the_other_numbers_come_in_named_sets():
    runs = _runs()
    # One seed: every SD reads 0, so its set is not offered; with two seeds it is.
    assert available_sets(runs, "infilling") == ["Judge dimensions", "Extraction", "Cost"]
    seeded = runs.assign(**{"metrics.seed0/at_avg": [0.2, 0.3], "metrics.seed1/at_avg": [0.3, 0.3]})
    assert available_sets(seeded, "infilling") == ["Spread across seeds (SD)", "Judge dimensions", "Extraction", "Cost"]
    sets = ["Extraction", "Judge dimensions"]
    chosen = [metric for _, metric in metric_columns(runs, MEAN, ALL_JUDGES, sets, "infilling")]
    assert chosen[-2:] == ["judge/j/fluency", "extraction_echo_rate"]
    assert "at_avg_lo" not in chosen and "at_avg_sd" not in chosen


def test_a_judge_dimension_reads_as_its_studys_rubric_names_it():
    """`coherence` is a dimension of the infilling rubric ("Bidirectional Coherence") and of the continuation example's
    ("Coherence with the opening"): each study's runs show it in their own words, in the table and on the chart."""
    runs = _runs().assign(**{"metrics.judge/j/coherence": [3.0, 4.0]})
    infilling = runs_frame(runs, MEAN, ALL_JUDGES, ["Judge dimensions"], study="infilling")
    assert "j Bidirectional Coherence" in infilling.columns
    continuation = runs_frame(runs.assign(**{"params.rubric": ["continuation_quality"] * 2}), MEAN, ALL_JUDGES,
                              ["Judge dimensions"], study="continuation")
    assert "j Coherence with the opening" in continuation.columns
    assert not any("Bidirectional" in name for name in continuation.columns)
    assert chart(runs, "judge/j/coherence", "continuation").axes[0].get_ylabel() == "j Coherence with the opening"
    assert chart(runs, "judge/j/coherence", "infilling").axes[0].get_ylabel() == "j Bidirectional Coherence"


def test_the_csv_keeps_numbers_and_their_bounds():
    table = runs_frame(_runs(), MEAN, ALL_JUDGES, study="infilling", as_text=False)
    assert table.loc[1, "AtAvg"] == 0.3 and (table.loc[1, "AtAvg low"], table.loc[1, "AtAvg high"]) == (0.22, 0.38)
    assert table.loc[0, "run id"] == "a" * 32


def test_the_charts_legend_sits_beside_the_bars():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = chart(_runs(), "at_avg")
    axes = figure.axes[0]
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    legend = axes.get_legend().get_window_extent(renderer)
    assert legend.x0 >= axes.get_window_extent(renderer).x1
    assert axes.get_ylabel() == "AtAvg"


def test_a_missing_number_says_why_and_a_one_setting_study_charts_its_conditions():
    """smollm2 showed '–' under Creative Integrity with no reason (its judge's checklist failed on every story); the
    incremental study got an empty chart (one prompt setting): its bars are now its conditions."""
    runs = pd.DataFrame({
        "run_id": ["a" * 32, "b" * 32, "c" * 32], "experiment_id": ["1"] * 3, "status": ["FINISHED"] * 3,
        "params.model_id": ["smollm2", "gemma3", "gemma3"], "params.prompt_setting": ["default"] * 3,
        "params.condition": ["full", "full", "sharded"], "metrics.judge/j/ci": [None, 0.125, 0.0],
        "metrics.judge/j/adherence": [None, 0.5, 0.25], "metrics.judge/j/checklist_failure_rate": [1.0, 0.0, 0.0],
    })
    table = runs_frame(runs, MEAN, ALL_JUDGES, study="incremental-delivery")
    assert table.loc[0, "j Creative Integrity"] == "– j checklist failures 100%"
    assert table.loc[1, "j Creative Integrity"] == "0.125"
    figure = chart(runs, "judge/j/ci")
    assert figure.axes[0].get_legend().get_title().get_text() == "Condition"


def test_any_studys_logged_intervals_show_in_the_table_and_as_error_bars():
    """Intervals are read from the keys every cell logs (`<key>_lo`, `<key>_hi`), whichever study logged them: here
    the example continuation study's, a plugin the app does not name."""
    from matplotlib.collections import LineCollection

    from narrative_eval.reports.labels import label

    runs = pd.DataFrame({
        "run_id": ["a" * 32, "b" * 32], "experiment_id": ["1"] * 2, "status": ["FINISHED"] * 2,
        "params.model_id": ["smollm2"] * 2, "params.prompt_setting": ["plain", "guided"], "params.condition": [""] * 2,
        "metrics.chrf": [0.21, 0.25], "metrics.chrf_lo": [0.15, 0.2], "metrics.chrf_hi": [0.27, 0.31],
    })
    table = runs_frame(runs, MEAN, ALL_JUDGES, study="continuation")
    assert table.loc[1, label("chrf")] == "0.250 [0.200, 0.310]"
    bars = [c for c in chart(runs, "chrf").axes[0].collections if isinstance(c, LineCollection)]
    assert len(bars) == 2  # one error bar per setting
    spans = sorted(tuple(round(y, 6) for y in segment[:, 1]) for bar in bars for segment in bar.get_segments())
    assert spans == [(0.15, 0.27), (0.2, 0.31)]
