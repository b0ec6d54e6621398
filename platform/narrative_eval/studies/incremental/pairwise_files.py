"""The files of the incremental-delivery study's end-of-sweep pairwise judges (studies/pairwise.py): where they lie on
a sweep's parent run (pairwise/<first 12 hex digits of the tasks file's sha256>/), their names, and their copy into a
report folder for the human-validation report."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.studies.incremental.vocabulary import NAME
from narrative_eval.study import experiment_of

ARTIFACT_DIR = "pairwise"
"""Folder of the pairwise files on the parent run (one subfolder per tasks file) and in the report folder."""
FILES: dict[str, str] = {"pairwise": "verdicts.jsonl", "cases": "cases.jsonl", "evidence": "evidence.jsonl"}
"""The human-validation report's input -> the file that holds it."""
JUDGMENTS_FILE = "judgments.json"


def artifact_dir(data_sha256: str) -> str:
    """Where one tasks file's pairwise files lie on the sweep's parent run."""
    return f"{ARTIFACT_DIR}/{data_sha256[:12]}"


def logged_files(parent: str, folder: str) -> set[str]:
    """Names of the files under `folder` on the parent run."""
    return {Path(info.path).name for info in tracking.client().list_artifacts(parent, folder)}


def export_pairwise_files(sweep: str, out_dir: str | Path, data_sha256: str | None = None) -> dict[str, Path]:
    """The sweep's pairwise verdicts, cases and evidence copied from its parent run into out_dir as
    pairwise_verdicts.jsonl, pairwise_cases.jsonl and pairwise_evidence.jsonl; report input name -> path, {} when
    the sweep ran no pairwise judges on that tasks file (default: the one its finished cells ran on)."""
    experiment = experiment_of(NAME)
    parent = tracking.find_sweep_run(experiment, sweep)
    if parent is None:
        return {}
    if data_sha256 is None:
        data_sha256 = str(tracking.report_cell_runs(experiment, sweep)["params.data_sha256"].iloc[0])
    folder = artifact_dir(data_sha256)
    present = logged_files(parent, folder)
    exported = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, name in FILES.items():
            if name in present:
                downloaded = tracking.client().download_artifacts(parent, f"{folder}/{name}", tmp)
                exported[key] = Path(shutil.copy(downloaded, Path(out_dir) / f"{ARTIFACT_DIR}_{name}"))
    return exported
