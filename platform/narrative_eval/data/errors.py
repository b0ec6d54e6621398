"""Errors for bad input files: every message names the file and the line."""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """A malformed row or record, located by file and line (1-based; the CSV header is line 1)."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class DataErrors(ValueError):
    """Several bad rows at once, so a researcher fixes a file in one pass."""

    def __init__(self, errors: list[DataError]):
        self.errors = errors
        shown = "\n".join(f"  {e}" for e in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"{len(errors)} invalid row(s):\n{shown}{more}")
