"""A continuation sweep's tables from MLflow: headline numbers per cell (main), every continuation (continuations)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from narrative_eval import tracking
from narrative_eval.reports.tables import write_table
from narrative_eval.study import load_study

from narrative_eval_continuation.vocabulary import NAME, TABLE


def write_report(sweep: str, out_dir: str | Path, data_sha256: str | None = None) -> dict[str, str]:
    """main and continuations as CSV, markdown and LaTeX in out_dir; returns title -> markdown."""
    study = load_study(NAME)
    runs = tracking.report_cell_runs(study.experiment, sweep, data_sha256)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = pd.DataFrame({"model": runs["params.model_id"], "setting": runs["params.prompt_setting"]})
    judges = sorted({c.split("/")[1] for c in runs.columns if c.startswith("metrics.judge/") and c.endswith("/qavg")})
    headlines = [name for name in study.headline_metrics(judges) if f"metrics.{name}" in runs]
    main = cells.assign(**{name: runs[f"metrics.{name}"] for name in [*headlines, "answered_rate"]})
    rows = pd.concat([tracking.load_table(run_id, TABLE).assign(model=model, setting=setting)
                      for run_id, model, setting in zip(runs["run_id"], cells["model"], cells["setting"])])
    scores = [name for name in rows.columns if name in headlines or name.endswith("/qavg")]
    shown = ["model", "setting", "item_id", "seed", "next_sentence", "continuation", *scores]
    continuations = rows[shown].sort_values(["model", "setting", "item_id", "seed"])
    return {"Continuation: headline numbers per model x setting":
            write_table(main.sort_values(["model", "setting"]), out_dir, "main"),
            "Continuations beside the true next sentence": write_table(continuations, out_dir, "continuations")}
