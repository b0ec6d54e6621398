"""The one JSONL reader: (line number, object) per non-blank line, or a file:line error for a bad one."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from narrative_eval.errors import DataError, read_text


def read_jsonl(path: str | Path, what: str = "JSONL file") -> Iterator[tuple[int, dict[str, Any] | DataError]]:
    """Yield (line, object) for every non-blank line; a line that is not a JSON object yields a DataError instead.

    The file is decoded as `read_text` does (UTF-8 with or without BOM, UTF-16 detected, anything else named).
    """
    path = Path(path)
    # StringIO splits on newlines only (not on U+2028 and the like, which JSON strings may hold).
    for line_no, line in enumerate(io.StringIO(read_text(path, what)), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield line_no, DataError(path, line_no, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        except RecursionError:
            yield line_no, DataError(path, line_no, "invalid JSON: nested too deeply")
            continue
        if not isinstance(record, dict):
            yield line_no, DataError(path, line_no, "expected a JSON object")
            continue
        yield line_no, record


def checked_jsonl(
    path: str | Path, what: str, check: Callable[[dict[str, Any]], list[str]], errors: list[DataError]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line, object) for every line that parses and passes `check` (which lists a line's problems);
    every bad line's problems go to `errors` with its file:line, so one pass reports them all."""
    for line_no, record in read_jsonl(path, what):
        if isinstance(record, DataError):
            errors.append(record)
            continue
        problems = check(record)
        if problems:
            errors.extend(DataError(Path(path), line_no, problem) for problem in problems)
            continue
        yield line_no, record
