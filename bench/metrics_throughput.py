"""Throughput of the five automatic metrics on 1,000 candidate/reference pairs (CPU).

Pairs come from data/infilling/benchmark.csv when it exists (gold answers as references, the same
answers shuffled as candidates); otherwise sentences are synthesised from a fixed vocabulary.
Model loading is timed separately from scoring. Wall seconds are the target's measure; process CPU
seconds are printed too, since on a shared machine wall time also counts other processes' turns.

    python bench/metrics_throughput.py [--pairs 1000] [--csv PATH] [--threads N] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO_ROOT / "data" / "infilling" / "benchmark.csv"
TARGET_SECONDS = 60.0
"""Budget for all five metrics on 1,000 pairs on a 2-core machine."""

_SUBJECTS = ["The old fisherman", "Maria", "A stray dog", "The young soldier", "Her brother", "The village", "Nobody"]
_VERBS = ["walked slowly toward", "stared at", "ran past", "quietly remembered", "never forgot", "searched for", "found"]
_OBJECTS = ["the harbour", "the burning barn", "an unopened letter", "the locked door", "the storm", "his mother's ring"]
_TAILS = ["before dawn", "without a word", "as the rain began", "for the last time", "while the others slept", ""]


def synthesised_pairs(count: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """Random one-to-three-sentence texts; candidates and references drawn independently."""

    def text() -> str:
        sentences = []
        for _ in range(rng.randint(1, 3)):
            tail = rng.choice(_TAILS)
            words = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
            sentences.append(f"{words} {tail}".strip() + ".")
        return " ".join(sentences)

    return [text() for _ in range(count)], [text() for _ in range(count)]


def benchmark_pairs(path: Path, count: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """Gold answers as references and the shuffled gold answers as candidates, cycled up to `count`."""
    with path.open(newline="", encoding="utf-8") as handle:
        golds = [row["gold_answer"] for row in csv.DictReader(handle) if row.get("gold_answer", "").strip()]
    if not golds:
        raise SystemExit(f"{path} has no gold_answer values")
    references = [golds[i % len(golds)] for i in range(count)]
    candidates = references[:]
    rng.shuffle(candidates)
    return candidates, references


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass for model metrics")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    if args.csv.is_file():
        candidates, references = benchmark_pairs(args.csv, args.pairs, rng)
        source = str(args.csv)
    else:
        candidates, references = synthesised_pairs(args.pairs, rng)
        source = "synthesised sentences"

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from narrative_eval.metrics import METRICS, at_avg, metric_names
    from narrative_eval.metrics.bertscore import BertScore
    from narrative_eval.metrics.semf1 import SemF1
    from narrative_eval.records import MetricsSpec

    spec = MetricsSpec()
    print(f"{len(candidates)} pairs from {source}; torch threads: {torch.get_num_threads()}")
    print(f"{'metric':<10} {'load s':>8} {'score s':>8} {'cpu s':>8} {'pairs/s':>9} {'mean':>7}")
    total_scoring = 0.0
    total_cpu = 0.0
    total_loading = 0.0
    means: dict[str, float] = {}
    for name in metric_names(spec):
        metric = METRICS.get(name).from_spec(spec)
        if isinstance(metric, (BertScore, SemF1)):
            metric.batch_size = args.batch_size
        # Warm-up on one pair loads the model (and WordNet); timed apart from scoring.
        started = time.perf_counter()
        metric.score(candidates[:1], references[:1])
        loading = time.perf_counter() - started
        started, cpu_started = time.perf_counter(), time.process_time()
        scores = metric.score(candidates, references)
        scoring, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        total_scoring += scoring
        total_cpu += cpu
        total_loading += loading
        means[name] = sum(scores) / len(scores)
        print(f"{name:<10} {loading:>8.2f} {scoring:>8.2f} {cpu:>8.2f} {len(scores) / scoring:>9.1f} {means[name]:>7.3f}")
    print(
        f"total scoring seconds (all five): {total_scoring:.2f} wall (target <= {TARGET_SECONDS:.0f}), "
        f"{total_cpu:.2f} CPU; loading: {total_loading:.2f} wall"
    )
    print(f"AtAvg of the means: {at_avg(means):.3f}")
    return 0 if total_scoring <= TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
