"""The one table writer: CSV keeps the logged names for analysis, LaTeX reads like a paper (the label map's names)."""

from __future__ import annotations

import pandas as pd

from narrative_eval.reports.tables import write_table


def test_latex_uses_readable_names_and_csv_keeps_the_logged_ones(tmp_path):
    table = pd.DataFrame({"model": ["m1"], "metric": ["j:qavg"], "at_avg": [0.25], "j:high_pct": [40.0]})
    markdown = write_table(table, tmp_path, "t")
    latex = (tmp_path / "t.tex").read_text()
    assert "AtAvg" in latex and "j High\\%" in latex and "j QAvg" in latex and "at\\_avg" not in latex
    assert list(pd.read_csv(tmp_path / "t.csv").columns) == ["model", "metric", "at_avg", "j:high_pct"]
    assert "at_avg" in markdown  # the terminal and MLflow descriptions keep the names they are filtered by
