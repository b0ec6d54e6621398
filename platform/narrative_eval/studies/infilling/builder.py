"""Build infilling instances from plain passages.

A passage is ``(dataset, ref_id, text)``. For each wanted span length n and blank position,
the builder removes n contiguous sentences starting at an index inside that position's band
(see ``position_of``), replaces them with one ``______`` and keeps them as the gold answer.
Choices are seeded per passage, so the same seed and passages always give the same instances,
and adding a passage never changes the instances built from the others.

Command line::

    python -m narrative_eval.studies.infilling.builder --passages data/infilling/passages \\
        --out data/infilling/benchmark.csv --seed 0
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.instances import BLANK, DEFAULT_UNIT, EOS, save_instances, sentences
from narrative_eval.data.jsonl import checked_jsonl
from narrative_eval.records import InfillingInstance, Position
from narrative_eval.studies.infilling.positions import POSITIONS, blank_position, position_of


def _passage_problems(record: dict[str, Any]) -> list[str]:
    empty = [key for key in ("dataset", "ref_id", "text") if not str(record.get(key) or "").strip()]
    return [f"missing or empty field(s): {', '.join(empty)}"] if empty else []


class Passage(NamedTuple):
    """One source passage."""

    dataset: str
    """Collection (or domain) name written to the instances' dataset column."""
    ref_id: str
    """Identifier unique within the dataset."""
    text: str
    """The passage: plain prose, or sentences joined by ' <eos> '."""


def load_passages(path: str | Path) -> list[Passage]:
    """Read passages from a JSONL file, or from every *.jsonl file of a folder (sorted by name).

    Each line is ``{"dataset": ..., "ref_id": ..., "text": ...}``; bad lines raise DataErrors.
    """
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise DataErrors([DataError(path, None, "no *.jsonl passage files found")])
    passages: list[Passage] = []
    errors: list[DataError] = []
    for file in files:
        for _, record in checked_jsonl(file, "passage file", _passage_problems, errors):
            passages.append(Passage(str(record["dataset"]).strip(), str(record["ref_id"]).strip(), str(record["text"])))
    if errors:
        raise DataErrors(errors)
    return passages


def start_band(n_sentences: int, n: int, position: Position) -> list[int]:
    """Start indices whose blank falls in ``position`` and whose n-sentence span fits the passage.

    At least one sentence must remain as context, so a passage of n sentences or fewer has none.
    """
    if n_sentences <= n:
        return []
    return [start for start in range(n_sentences - n + 1) if position_of(start, n_sentences) == position]


def make_instance(dataset: str, ref_id: str, passage_sentences: Sequence[str], unit_idx: int, n: int) -> InfillingInstance:
    """The instance that removes sentences [unit_idx, unit_idx + n) from the passage."""
    removed = list(passage_sentences[unit_idx : unit_idx + n])
    kept = list(passage_sentences[:unit_idx]) + [BLANK] + list(passage_sentences[unit_idx + n :])
    return InfillingInstance(
        dataset=dataset,
        ref_id=ref_id,
        source_text=EOS.join(passage_sentences),
        problem=" ".join(kept),
        gold_answer=" ".join(removed),
        unit=DEFAULT_UNIT,
        n=n,
        unit_idx=unit_idx,
    )


def _choose_combos(
    combos: list[tuple[int, Position]], per_passage: int, rng: random.Random
) -> list[tuple[int, Position]]:
    """Pick ``per_passage`` (n, position) pairs, preferring ones whose n and position are still unused.

    Positions a passage can hold in fewest ways are tried first (closing is often possible only
    for n = 1), so scarce positions are not crowded out; spreading the picks this way gives each
    passage different span lengths and positions and the whole benchmark an even coverage.
    """
    ways = Counter(position for _n, position in combos)
    pool = combos[:]
    rng.shuffle(pool)
    pool.sort(key=lambda combo: ways[combo[1]])  # stable: keeps the shuffled order within a position
    chosen: list[tuple[int, Position]] = []
    for wants_new_n, wants_new_position in ((True, True), (True, False), (False, True), (False, False)):
        for combo in pool:
            if len(chosen) >= per_passage:
                return chosen
            if combo in chosen:
                continue
            if wants_new_n and combo[0] in {c[0] for c in chosen}:
                continue
            if wants_new_position and combo[1] in {c[1] for c in chosen}:
                continue
            chosen.append(combo)
    return chosen


def build_instances(
    passages: Iterable[Passage | tuple[str, str, str]],
    n_values: Sequence[int] = (1, 2, 3),
    positions: Sequence[Position] = POSITIONS,
    seed: int = 0,
    per_passage: int | None = None,
) -> list[InfillingInstance]:
    """Instances from passages: one per feasible (n, position) pair, or ``per_passage`` of them.

    For each pair the start index is drawn (seeded) from the position's band; pairs a short
    passage cannot hold (e.g. closing in five sentences, or n >= sentence count) are skipped.
    ``per_passage`` keeps that many pairs per passage, spread over different n and positions.
    """
    for n in n_values:
        if not 1 <= int(n) <= 3:
            raise ValueError(f"n must be 1-3, got {n}")
    for position in positions:
        if position not in POSITIONS:
            raise ValueError(f"unknown position {position!r} (use {', '.join(POSITIONS)})")
    instances: list[InfillingInstance] = []
    seen: set[tuple[str, str]] = set()
    for item in passages:
        passage = Passage(*item)
        key = (passage.dataset, passage.ref_id)
        if key in seen:
            raise ValueError(f"duplicate passage {passage.dataset}/{passage.ref_id}")
        seen.add(key)
        passage_sentences = sentences(passage.text)
        # A string seed is hashed deterministically by random.Random, independent of PYTHONHASHSEED.
        rng = random.Random(f"{seed}|{passage.dataset}|{passage.ref_id}")
        bands = {
            (int(n), position): start_band(len(passage_sentences), int(n), position)
            for n in n_values
            for position in positions
        }
        starts = {combo: rng.choice(band) for combo, band in bands.items() if band}
        combos = list(starts)
        if per_passage is not None:
            combos = _choose_combos(combos, per_passage, rng)
        for combo in sorted(combos, key=lambda combo: (starts[combo], combo[0])):
            instances.append(make_instance(passage.dataset, passage.ref_id, passage_sentences, starts[combo], combo[0]))
    return instances


def pick_sample(instances: Sequence[InfillingInstance], per_dataset: int = 3) -> list[InfillingInstance]:
    """A small quick-test sample: per dataset, the first instance of each n in turn (file order kept)."""
    picked: list[InfillingInstance] = []
    for dataset in dict.fromkeys(instance.dataset for instance in instances):
        rows = [instance for instance in instances if instance.dataset == dataset]
        chosen: list[InfillingInstance] = []
        # Cycle through n = 1, 2, 3 so the sample covers every span length.
        while len(chosen) < min(per_dataset, len(rows)):
            before = len(chosen)
            for n in (1, 2, 3):
                match = next((row for row in rows if row.n == n and row not in chosen), None)
                if match is not None and len(chosen) < per_dataset:
                    chosen.append(match)
            if len(chosen) == before:
                break
        picked.extend(row for row in rows if row in chosen)
    return picked


def _summary(instances: list[InfillingInstance]) -> str:
    """Counts per dataset, n and position, for the command's output."""
    by_dataset = Counter(instance.dataset for instance in instances)
    by_n = Counter(instance.n for instance in instances)
    by_position = Counter(blank_position(instance) for instance in instances)
    lines = [f"{len(instances)} instances"]
    lines.append("  datasets:  " + ", ".join(f"{k}={v}" for k, v in sorted(by_dataset.items())))
    lines.append("  n:         " + ", ".join(f"{k}={v}" for k, v in sorted(by_n.items())))
    lines.append("  positions: " + ", ".join(f"{p}={by_position.get(p, 0)}" for p in POSITIONS))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m narrative_eval.studies.infilling.builder",
        description="Build infilling instances (CSV or JSONL) from passage JSONL files.",
    )
    parser.add_argument("--passages", required=True, help="a passages .jsonl file or a folder of them")
    parser.add_argument("--out", required=True, help="output instances file (.csv or .jsonl)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the blank placement (default 0)")
    parser.add_argument(
        "--per-passage",
        type=int,
        default=3,
        help="instances per passage, spread over n and positions; 0 keeps every feasible pair (default 3)",
    )
    parser.add_argument("--n-values", default="1,2,3", help="comma-separated span lengths (default 1,2,3)")
    parser.add_argument("--positions", default=",".join(POSITIONS), help="comma-separated positions (default all)")
    parser.add_argument("--sample-out", help="also write a small quick-test sample here (.csv or .jsonl)")
    parser.add_argument("--sample-per-dataset", type=int, default=3, help="sample rows per dataset (default 3)")
    args = parser.parse_args(argv)
    try:
        passages = load_passages(args.passages)
    except DataErrors as exc:
        print(exc, file=sys.stderr)
        return 1
    instances = build_instances(
        passages,
        n_values=tuple(int(v) for v in args.n_values.split(",") if v.strip()),
        positions=tuple(p.strip() for p in args.positions.split(",") if p.strip()),
        seed=args.seed,
        per_passage=args.per_passage or None,
    )
    out = save_instances(instances, args.out)
    print(f"wrote {out}")
    print(_summary(instances))
    if args.sample_out:
        sample = save_instances(pick_sample(instances, args.sample_per_dataset), args.sample_out)
        print(f"wrote {sample}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
