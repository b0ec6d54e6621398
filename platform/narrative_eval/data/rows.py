"""Any study's data file read as rows (the generic item loader), and `--limit`'s spread over a stratum.

A study names the fields it reads; a row without one of them is a `DataError` at its file:line (all of them at
once, as `DataErrors`), which every command prints as ``error: file:line: ...`` and exits 2, never a KeyError
later. The shipped passage files (`data/infilling/passages/*.jsonl`: `dataset`, `ref_id`, `text`) are such files.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from narrative_eval.data.jsonl import read_jsonl
from narrative_eval.errors import DataError, DataErrors, read_text

T = TypeVar("T")


@dataclass(frozen=True)
class DataRow:
    """One row of a data file: where it is, and its fields (every field the study named is there)."""

    path: str
    line: int
    """1-based line the row starts at (a CSV's header is line 1)."""
    values: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def error(self, message: str) -> DataError:
        """A problem with this row's contents, located at its file:line: what a study raises for bad data."""
        return DataError(self.path, self.line, message)


def load_rows(path: str | Path, fields: Sequence[str], what: str = "data file") -> list[DataRow]:
    """Every row of a JSONL (one object a line) or CSV file; DataErrors naming every row (file:line) that lacks
    one of `fields`, a line that is not a record, or a file with no rows."""
    path = Path(path)
    records = _csv_records(path, what) if path.suffix.lower() == ".csv" else read_jsonl(path, what)
    rows: list[DataRow] = []
    errors: list[DataError] = []
    for line, record in records:
        if isinstance(record, DataError):
            errors.append(record)
            continue
        missing = [name for name in fields if record.get(name) in (None, "")]
        if missing:
            errors.append(DataError(path, line, f"missing field(s): {', '.join(missing)} "
                                                f"(the row has: {', '.join(record) or 'none'})"))
            continue
        rows.append(DataRow(str(path), line, record))
    if not rows and not errors:
        errors.append(DataError(path, None, f"no rows: the {what} is empty"))
    if errors:
        raise DataErrors(errors)
    return rows


def _csv_records(path: Path, what: str):
    """(start line, row dict) per non-blank CSV record, the header naming the fields."""
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 24))
    reader = csv.DictReader(io.StringIO(read_text(path, what), newline=""))
    last = 1
    for record in reader:
        start, last = last + 1, reader.line_num
        if any((value or "").strip() for value in record.values()):
            yield start, {key.strip(): value for key, value in record.items() if key is not None}


def interleave(members: list[int], keys: Sequence[Callable[[int], Hashable]]) -> list[int]:
    """Positions ordered round-robin over keys[0]'s groups (in order of first appearance), each group itself
    interleaved by the next keys."""
    if not keys or len(members) <= 1:
        return list(members)
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for position in members:
        groups[keys[0](position)].append(position)
    queues = [interleave(group, keys[1:]) for group in groups.values()]
    deepest = max(len(q) for q in queues)
    return [q[depth] for depth in range(deepest) for q in queues if depth < len(q)]


def spread_limit(items: Sequence[T], limit: int, *keys: Callable[[T], Hashable]) -> list[T]:
    """`limit` items taken round-robin over `keys[0]`'s values first, then the next key's, so a small run spans
    every stratum; the kept items come back in their own order (no keys: the first `limit`)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    chosen = set(interleave(list(range(len(items))), [lambda p, key=key: key(items[p]) for key in keys])[:limit])
    return [item for position, item in enumerate(items) if position in chosen]


__all__ = ["DataRow", "interleave", "load_rows", "spread_limit"]
