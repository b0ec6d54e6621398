"""Figures for human-anchored means with a rating budget: coverage and mean width of human-only, plain PPI, PPI++
and stratified (rate-next) PPI over 1,000 simulated cells, and the rating plan's predicted width against the width
reached when that many outputs are rated.

  python bench/ppi_plan.py [--runs 1000]

The simulated cells are tests/stats/test_ppi_power.py's (400 outputs, 60 ratings; the judge biased by +0.5, its
noise 0.1 on 70% of the outputs and 1.5 on the rest, known to the rate-next order as its uncertainty; people's
noise 0.4), so the figures are the ones that test asserts on.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from narrative_eval.stats.ppi import human_anchored_mean, stratified_mean
from narrative_eval.stats.rating_plan import rating_plan
from tests.stats.test_ppi_power import BUDGET, N_OUTPUTS, TRUE_MEAN, rated_next, simulated_cells


def coverage_table(runs: int) -> None:
    rng = np.random.default_rng(20250107)
    judge, human, spread = simulated_cells(rng, runs=runs)
    uniform = np.where(np.arange(N_OUTPUTS) < BUDGET, human, np.nan)
    started = time.perf_counter()
    fixed = [human_anchored_mean(j, h) for j, h in zip(judge, uniform)]
    active = [stratified_mean(j, *rated_next(s, h, seed)) for seed, (j, h, s) in enumerate(zip(judge, human, spread))]
    seconds = time.perf_counter() - started
    intervals = {"human only": [e.human for e in fixed], "PPI": [e.ppi for e in fixed],
                 "PPI++": [e.ppi_tuned for e in fixed], "stratified PPI++ (rate next)": [e.estimate for e in active]}
    print(f"{runs} simulated cells, {N_OUTPUTS} outputs, {BUDGET} ratings each ({seconds:.1f} s)")
    print(f"{'estimator':30} {'coverage':>8} {'mean width':>10}")
    for name, found in intervals.items():
        coverage = np.mean([i.lo <= TRUE_MEAN <= i.hi for i in found])
        print(f"{name:30} {coverage:8.3f} {np.mean([i.hi - i.lo for i in found]):10.3f}")
    print(f"PPI++ lambda: mean {np.mean([e.tuning for e in fixed]):.3f}")


def plan_against_reached(repeats: int = 200) -> None:
    rng = np.random.default_rng(11)
    judge, human, _ = simulated_cells(rng, runs=1, n=800)
    judge, human = judge[0], human[0]
    pilot = np.where(np.arange(800) < 40, human, np.nan)
    print("\nrating plan from a pilot of 40 ratings of 800 outputs; then that many rated (drawn anew 200 times)")
    print(f"{'target':>6} {'pilot width':>11} {'PPI++ n':>7} {'human n':>7} {'judge width':>11} {'reached':>7} {'sd':>6}")
    for target in (0.35, 0.25, 0.2):
        plan = rating_plan(judge, pilot, target)
        widths = []
        for _ in range(repeats):
            order = rng.permutation(800)[: int(plan.ppi_needed)]
            rated = np.full(800, np.nan)
            rated[order] = human[order]
            result = human_anchored_mean(judge, rated)
            widths.append(result.ppi_tuned.hi - result.ppi_tuned.lo)
        print(f"{target:6.2f} {plan.width:11.3f} {plan.ppi_needed:7.0f} {plan.human_needed:7.0f} "
              f"{plan.judge_width:11.3f} {np.mean(widths):7.3f} {np.std(widths):6.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    arguments = parser.parse_args()
    coverage_table(arguments.runs)
    plan_against_reached()
