"""The writing tasks of an incremental-delivery cell: those its spec selects (to run it), and those a finished
cell ran, read again from the files its spec names (for reports and end-of-sweep judges)."""

from __future__ import annotations

from pathlib import Path

from narrative_eval.data.files import file_sha256
from narrative_eval.errors import UserError
from narrative_eval.records import CellSpec
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.tasks import load_tasks


def select_tasks(cell: CellSpec) -> list[WritingTask]:
    """The cell's tasks: the tasks file with its constraints (extra['constraints'] or the sibling constraints.jsonl), then the limit."""
    tasks = load_tasks(cell.data_path, cell.extra.get("constraints"))
    return tasks[: cell.limit] if cell.limit is not None else tasks


def tasks_of_cell(cell: CellSpec, root: Path | None = None) -> list[WritingTask]:
    """The tasks a cell ran, read again from the files its spec names (relative paths from `root`, default the
    working directory) when they are still there unchanged; ValueError says why not."""

    def where(path: str) -> Path:
        return Path(path) if root is None or Path(path).is_absolute() else Path(root) / path

    constraints = cell.extra.get("constraints")
    files = [(where(cell.data_path), cell.data_sha256)]
    if constraints and cell.extra.get("constraints_sha256"):
        files.append((where(constraints), cell.extra["constraints_sha256"]))
    for path, sha256 in files:
        if not path.is_file():
            raise ValueError(f"{path} not found")
        if file_sha256(path) != sha256:
            raise ValueError(f"{path} changed since the sweep ran")
    try:
        tasks = load_tasks(where(cell.data_path), where(constraints) if constraints else None)
    except UserError as error:
        raise ValueError(f"{cell.data_path} no longer loads ({error.problems[0]})") from None
    return tasks[: cell.limit] if cell.limit is not None else tasks
