"""Seconds for the incremental study's paired effects with 10,000 story-clustered bootstrap resamples of 960 pairs
(160 tasks x 6 models, the study's full grid), the size a report computes.

    python bench/bootstrap.py [--n-boot 10000] [--repeats 3]

Prints each repeat's seconds; the interval bounds are checked to hold their estimate (tests/stats/test_bootstrap.py
checks the same table at this size without timing it: a test never asserts a time a busy machine misses).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from narrative_eval.studies.incremental.effects import DIMENSIONS, paired_effects

N_TASKS, N_MODELS = 160, 6


def pairs(seed: int = 0) -> pd.DataFrame:
    """Random 1-5 scores of FULL and another condition for every task and model, on every dimension."""
    rng = np.random.default_rng(seed)
    frame = {"story_id": np.repeat([f"s{i}" for i in range(N_TASKS)], N_MODELS),
             "model": np.tile([f"m{j}" for j in range(N_MODELS)], N_TASKS)}
    for dim in DIMENSIONS:
        frame[f"{dim}_full"] = rng.integers(1, 6, N_TASKS * N_MODELS).astype(float)
        frame[f"{dim}_x"] = rng.integers(1, 6, N_TASKS * N_MODELS).astype(float)
    return pd.DataFrame(frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    table = pairs()
    for repeat in range(args.repeats):
        start = time.perf_counter()
        effects = paired_effects(table, n_boot=args.n_boot, seed=repeat)
        seconds = time.perf_counter() - start
        assert ((effects["lo"] <= effects["delta"]) & (effects["delta"] <= effects["hi"])).all()
        print(f"repeat {repeat}: {seconds:.2f} s for {args.n_boot:,} resamples of {len(table)} pairs "
              f"({len(DIMENSIONS)} dimensions)")


if __name__ == "__main__":
    main()
