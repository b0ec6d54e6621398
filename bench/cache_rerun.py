"""Request-cache benchmark: wall time of rerunning a finished sweep against its first run.

Target: rerun / first <= 0.05. Also prints a cold-tracking rerun (a new sweep name over the same
request cache: every reply comes from the cache, metrics and logging are redone).
Usage: python bench/cache_rerun.py [--limit 24]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import REPO, isolated_stores, write_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=24)
    args = parser.parse_args()
    root = isolated_stores("bench-cache-")

    from narrative_eval.config import load_config
    from narrative_eval.sweep import run_sweep

    catalog = REPO / "experiments/configs/models.yaml"
    first_config = load_config(write_config(root, "cache-first", limit=args.limit, settings="[L0, L2]"), catalog=catalog)
    start = time.perf_counter()
    first = run_sweep(first_config)
    first_seconds = time.perf_counter() - start

    start = time.perf_counter()
    rerun = run_sweep(first_config)
    rerun_seconds = time.perf_counter() - start

    cold_config = load_config(write_config(root, "cache-cold", limit=args.limit, settings="[L0, L2]"), catalog=catalog)
    start = time.perf_counter()
    cold = run_sweep(cold_config)
    cold_seconds = time.perf_counter() - start

    print(f"first run: {first_seconds:.2f} s, {first.generated} requests generated")
    print(f"rerun of the finished sweep: {rerun_seconds:.2f} s, {rerun.generated} generated, "
          f"{rerun.count('skipped')} cells skipped")
    print(f"ratio rerun / first: {rerun_seconds / first_seconds:.3f} (target <= 0.05)")
    print(f"new sweep over the same cache: {cold_seconds:.2f} s, {cold.generated} generated "
          f"(ratio {cold_seconds / first_seconds:.3f}; metrics and logging are recomputed)")


if __name__ == "__main__":
    main()
