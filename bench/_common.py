"""Shared set-up for benchmarks: a throwaway MLflow store and request cache, and a sweep config."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def isolated_stores(prefix: str) -> Path:
    """Point MLflow and the request cache at a fresh temporary folder."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{root / 'mlflow.db'}"
    os.environ["NARRATIVE_EVAL_ARTIFACT_ROOT"] = str(root / "artifacts")
    os.environ["NARRATIVE_EVAL_CACHE"] = str(root / "requests.sqlite")
    return root


def write_config(root: Path, name: str, *, limit: int, settings: str = "[L2]", models: str = "[smollm2]",
                 max_new_tokens: int = 64, judges: str = "[]") -> Path:
    path = root / f"{name}.yaml"
    path.write_text(
        f"""
study: infilling
sweep: {name}
data: {REPO / 'data/infilling/benchmark.csv'}
limit: {limit}
models: {models}
prompt_settings: {settings}
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: {max_new_tokens}}}
judges: {judges}
report_dir: {root / 'report' / name}
"""
    )
    return path
