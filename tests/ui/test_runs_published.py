"""The Runs tab's published rows: the study's Table 3 values under the tab's own columns, marked published."""

from __future__ import annotations

import pandas as pd

from narrative_eval.studies import infilling
from narrative_eval.study import load_study
from ui.runs import published_rows


def test_published_rows_carry_the_tables_numbers_marked_published_and_say_where_they_come_from():
    mine = pd.DataFrame({"model": ["smollm2"], "setting": ["L0"], "status": ["FINISHED"],
                         "AtAvg": ["0.250 [0.200, 0.300]"], "run id": ["abcd1234"]})
    table, note = published_rows(mine, load_study(infilling.NAME).published_reference)
    assert table.iloc[0]["model"] == "smollm2"  # the sweep's rows stay first
    llama = table[(table["model"] == "LLaMA-3.1-8B (published)") & (table["setting"] == "L0")].iloc[0]
    # data/reference/published_infilling.csv, Table 3, row 1: AtAvg 0.311, QAvg 3.878
    assert (llama["AtAvg"], llama["published judge QAvg"]) == ("0.311", "3.878")
    assert llama["status"] == "published, Table 3"
    assert set(table["status"]) == {"FINISHED", "published, Table 3"}
    # The note's words come from the study's reference rows, not from the app.
    assert note.startswith("Published rows (published, Table 3): on the study's benchmark and judge, not this sweep's")
