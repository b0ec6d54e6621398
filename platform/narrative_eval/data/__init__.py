"""Data: loading, validating, building and subsetting infilling instances; writing tasks."""

from typing import Any

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

# The builder is also a command (python -m narrative_eval.data.builder); importing it here
# eagerly would make runpy warn that the module was loaded twice, so its names load on first use.
_BUILDER_NAMES = frozenset({"Passage", "build_instances", "load_passages", "make_instance", "pick_sample", "start_band"})


def __getattr__(name: str) -> Any:
    if name in _BUILDER_NAMES:
        from narrative_eval.data import builder

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Creative-writing task loaders are imported below.
from narrative_eval.data.tasks import GENRES, load_tasks, save_tasks  # noqa: E402

__all__ = [
    "BLANK",
    "COLUMNS",
    "DOMAINS",
    "GENRES",
    "POSITIONS",
    "DataError",
    "DataErrors",
    "blank_position",
    "count_blanks",
    "domain",
    "file_sha256",
    "load_instances",
    "load_tasks",
    "position_of",
    "save_instances",
    "save_tasks",
    "sentences",
    "split_problem",
    "spread_limit",
    "stratified_subset",
    *sorted(_BUILDER_NAMES),
]
