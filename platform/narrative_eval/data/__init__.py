"""Data: loading and validating instances files (passages with one blank), any study's rows (`load_rows`), the JSONL
reader, and a file's digest.
The infilling study's blank positions, subset rules and builder live in its package (`studies/infilling/`)."""

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.files import file_sha256
from narrative_eval.data.rows import DataRow, load_rows, spread_limit
from narrative_eval.data.instances import (
    BLANK,
    COLUMNS,
    DOMAINS,
    count_blanks,
    domain,
    load_instances,
    save_instances,
    sentences,
    split_problem,
)

__all__ = [
    "BLANK",
    "COLUMNS",
    "DOMAINS",
    "DataError",
    "DataRow",
    "DataErrors",
    "count_blanks",
    "domain",
    "file_sha256",
    "load_instances",
    "load_rows",
    "save_instances",
    "sentences",
    "split_problem",
    "spread_limit",
]
