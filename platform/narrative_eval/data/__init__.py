"""Data: loading, validating and subsetting infilling instances. The builder of
infilling instances is a command of its own: import it from `narrative_eval.data.builder`."""

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.infilling import (
    BLANK,
    COLUMNS,
    DOMAINS,
    POSITIONS,
    blank_position,
    count_blanks,
    domain,
    file_sha256,
    load_instances,
    position_of,
    save_instances,
    sentences,
    split_problem,
)
from narrative_eval.data.subset import spread_limit, stratified_subset

__all__ = [
    "BLANK",
    "COLUMNS",
    "DOMAINS",
    "POSITIONS",
    "DataError",
    "DataErrors",
    "blank_position",
    "count_blanks",
    "domain",
    "file_sha256",
    "load_instances",
    "position_of",
    "save_instances",
    "sentences",
    "split_problem",
    "spread_limit",
    "stratified_subset",
]
