"""Samples of high-quality fills (the infilling study's Table 17): every fill a judge rated above 4 on average,
with its passage, the removed text and the fill, best first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from narrative_eval.data.instances import load_instances
from narrative_eval.judges.judge import HIGH_QUALITY_THRESHOLD as HIGH
from narrative_eval.lazy import lazy_module
from narrative_eval.records.keys import judge_key

pd = lazy_module("pandas")

COLUMNS = ["model", "setting", "instance_id", "seed", "domain", "qavg", "passage", "gold", "fill"]


def high_quality_fills(gens: pd.DataFrame, judge: str, passages: dict[str, str]) -> pd.DataFrame:
    """The fills `judge` rated above HIGH, best first; `passages` maps instance id -> passage with its blank."""
    column = judge_key(judge, "qavg")
    if gens.empty or column not in gens:
        return pd.DataFrame(columns=COLUMNS)
    scores = pd.to_numeric(gens[column], errors="coerce")
    chosen = gens[scores > HIGH].assign(qavg=scores[scores > HIGH])
    table = pd.DataFrame({
        "model": chosen["model"], "setting": chosen["setting"], "instance_id": chosen["instance_id"],
        "seed": chosen["seed"], "domain": chosen.get("domain"), "qavg": chosen["qavg"],
        "passage": chosen["instance_id"].map(passages), "gold": chosen["gold"], "fill": chosen["answer"],
    }, columns=COLUMNS)
    return table.sort_values(["qavg", "model", "setting"], ascending=[False, True, True]).reset_index(drop=True)


def passages_of(runs: pd.DataFrame) -> dict[str, str]:
    """Instance id -> passage text, from the data files the cells ran on (a file no longer there is skipped)."""
    found: dict[str, str] = {}
    for path in runs.get("params.data_path", pd.Series(dtype=str)).dropna().unique():
        if Path(path).is_file():
            found.update({i.instance_id: i.problem for i in load_instances(path)})
    return found


def high_quality_tables(gens: pd.DataFrame, runs: pd.DataFrame, judges: list[str], out_dir: Path,
                        write: Callable[[pd.DataFrame, Path, str], str]) -> dict[str, str]:
    """One `high_quality_<judge>` table per judge that rated any fill above HIGH."""
    passages = passages_of(runs) if judges and not gens.empty else {}
    tables = {}
    for judge in judges:
        table = high_quality_fills(gens, judge, passages)
        if not table.empty:
            tables[f"High-quality fills (judge average > {HIGH:g}) [{judge}]"] = write(table, out_dir, f"high_quality_{judge}")
    return tables
