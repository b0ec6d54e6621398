"""A jury of three judges, one adversarial, against the truth: the weighted jury, the plain mean and the best single
judge, over simulated sweeps.

    python bench/jury_simulation.py [--runs 1000] [--outputs 60] [--controls 20] [--seed 0]

Each run draws `outputs` true qualities (1-5), three judges' scores of them (an accurate judge, a noisier one, and an
adversarial one that scores 6 - quality, each with Gaussian noise, rounded and kept on the 1-5 scale as a rubric's
scale does) and `controls` control items per judge (a known-good output of quality 4-5 against a control of quality
1-2): a member's weight comes from its discrimination on them (stats.judge_reliability.member_weights). Agreement
with the truth is Pearson's r over the run's outputs. Prints, per aggregate, the mean r over the runs, and how often
the weighted jury was at least as good as the mean and as the best single judge of the run.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from narrative_eval.stats.judge_reliability import jury_scores, member_weights

JUDGES = {"accurate": (1.0, 0.6), "noisy": (1.0, 1.2), "adversarial": (-1.0, 0.6)}
"""Judge -> (direction, noise SD): its score is 3 + direction x (quality - 3) + noise, rounded to the 1-5 scale."""


def scored(quality: np.ndarray, direction: float, noise: float, rng: np.random.Generator) -> np.ndarray:
    """A judge's scores of outputs of `quality`: on the rubric's scale, so rounded and bounded to 1-5."""
    return np.clip(np.round(3 + direction * (quality - 3) + rng.normal(0, noise, quality.shape)), 1, 5)


def one_run(rng: np.random.Generator, outputs: int, controls: int) -> dict[str, float]:
    """Pearson's r with the truth of each judge and each jury aggregate in one simulated sweep."""
    quality = rng.uniform(1, 5, outputs)
    scores = pd.DataFrame({judge: scored(quality, *shape, rng) for judge, shape in JUDGES.items()})
    good, bad = rng.uniform(4, 5, controls), rng.uniform(1, 2, controls)
    discrimination = {}
    for judge, shape in JUDGES.items():
        margin = scored(good, *shape, rng) - scored(bad, *shape, rng)
        discrimination[judge] = float(np.mean(np.where(margin > 0, 1.0, np.where(margin == 0, 0.5, 0.0))))
    found = {judge: float(np.corrcoef(scores[judge], quality)[0, 1]) for judge in JUDGES}
    found["best single"] = max(found[judge] for judge in JUDGES)
    weights = member_weights(discrimination)
    for aggregate in ("mean", "median", "majority", "weighted"):
        jury, _ = jury_scores(scores, aggregate, weights if aggregate == "weighted" else None)
        found[aggregate] = float(np.corrcoef(jury, quality)[0, 1]) if jury.std() > 0 else 0.0
    return found


def simulate(runs: int = 1000, outputs: int = 60, controls: int = 20, seed: int = 0) -> pd.DataFrame:
    """One row per run: each judge's and each aggregate's correlation with the truth."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame([one_run(rng, outputs, controls) for _ in range(runs)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--outputs", type=int, default=60)
    parser.add_argument("--controls", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    runs = simulate(args.runs, args.outputs, args.controls, args.seed)
    print(f"{args.runs} runs, {args.outputs} outputs, {args.controls} control items per judge; Pearson r with the truth")
    for column in runs.columns:
        print(f"  {column:12s} mean {runs[column].mean():+.3f}  (5th-95th percentile {runs[column].quantile(0.05):+.3f}"
              f" to {runs[column].quantile(0.95):+.3f})")
    print(f"  weighted >= mean in {(runs['weighted'] >= runs['mean']).mean():.1%} of runs, "
          f">= best single judge in {(runs['weighted'] >= runs['best single']).mean():.1%}")


if __name__ == "__main__":
    main()
