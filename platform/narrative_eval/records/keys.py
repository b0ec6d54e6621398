"""Metric and column keys, made and parsed in one place: a judge's numbers (`judge/<id>/<name>`), a seed's
(`seed<k>/<name>`), the SD across seeds (`<name>_sd`) and an interval's bounds (`<name>_lo`, `<name>_hi`). The Runs
tab, the reports and tracing read what the cells log under these keys."""

from __future__ import annotations

import re
from collections.abc import Iterable

JUDGE = "judge"
"""The first part of a judge's keys."""
SEED_KEY = re.compile(r"^seed(?P<seed>\d+)/(?P<name>.+)$")
LO, HI, SD = "_lo", "_hi", "_sd"
"""Endings of an interval's bounds and of the SD across seeds."""


def judge_prefix(judge_id: str) -> str:
    """What every key of one judge starts with."""
    return f"{JUDGE}/{judge_id}/"


def judge_key(judge_id: str, name: str) -> str:
    """`judge/<id>/<name>`: one judge's number (a dimension, qavg, high_pct, failure_rate...)."""
    return judge_prefix(judge_id) + name


def parse_judge_key(key: str) -> tuple[str, str] | None:
    """(judge id, name) of a judge's key; None for any other key."""
    parts = key.split("/")
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == JUDGE else None


def expected_name(name: str) -> str:
    """`expected_<name>`: a judge's probability-weighted value of a dimension or of its QAvg (`scoring: expected`),
    logged beside the sampled one."""
    return f"expected_{name}"


def seed_key(seed: int, name: str) -> str:
    """`seed<k>/<name>`: one seed's value of a number."""
    return f"seed{seed}/{name}"


def parse_seed_key(key: str) -> tuple[int, str] | None:
    """(seed, name) of a seed's key; None for any other key."""
    match = SEED_KEY.match(key)
    return (int(match["seed"]), match["name"]) if match else None


def sd_key(name: str) -> str:
    """`<name>_sd`: the SD of a number across seeds."""
    return name + SD


def interval_keys(name: str) -> tuple[str, str]:
    """(`<name>_lo`, `<name>_hi`): the bounds of a number's interval."""
    return name + LO, name + HI


def bounded_name(key: str) -> str | None:
    """The number an interval's bound belongs to (`chrf` of `chrf_lo`); None for any other key."""
    for end in (LO, HI):
        if key.endswith(end):
            return key.removesuffix(end)
    return None


def with_interval(name: str) -> tuple[str, str, str]:
    """(`<name>`, `<name>_lo`, `<name>_hi`): a number and the bounds of its interval, as table columns."""
    return (name, *interval_keys(name))


def is_spread(key: str) -> bool:
    """Whether a key is a number's SD or an interval bound rather than the number."""
    return key.endswith((SD, LO, HI))


def seeded(key: str, seed: int) -> str:
    """`<key>/seed<k>`: one seed of an item (a trace, a score record, a pair), keyed."""
    return f"{key}/seed{seed}"


RUN_METRIC = "metrics."
"""What a logged metric's column starts with in a frame of runs (mlflow.search_runs)."""


def metric_column(key: str) -> str:
    """`metrics.<key>`: a logged metric's column in a frame of runs."""
    return RUN_METRIC + key


def judges_logging(columns: Iterable[str], name: str) -> list[str]:
    """The ids of the judges whose `judge/<id>/<name>` is among `columns` (metric keys, or run-frame columns)."""
    keys = (str(c).removeprefix(RUN_METRIC) for c in columns)
    return sorted({parsed[0] for parsed in map(parse_judge_key, keys) if parsed is not None and parsed[1] == name})


__all__ = ["RUN_METRIC", "bounded_name", "interval_keys", "is_spread", "judge_key", "judge_prefix", "judges_logging",
           "metric_column", "parse_judge_key", "parse_seed_key", "sd_key", "seed_key", "seeded", "with_interval"]
