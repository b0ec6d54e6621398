"""The embedded judge on the quickstart's control items, its scores sampled and probability-weighted
(`scoring: expected`): each check's statistic with its interval, both ways.

    python bench/expected_scores.py [--config experiments/configs/quickstart.yaml] [--cache .cache/requests.sqlite]

Builds the quickstart's control items as its sweep does (the infilling study's controls for each judge of the config,
K from its `judge_checks`), judges them through the request cache twice, once as configured and once with
`scoring: expected` (another request: it asks for token log-probabilities), and prints both check tables and the
seconds each took. Nothing is logged to MLflow.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from narrative_eval.backends import CachedBackend, RequestCache, get_backend
from narrative_eval.config import load_config
from narrative_eval.judges.checks import judge_controls
from narrative_eval.stats.judge_checks import check_rows, judge_checks_table
from narrative_eval.study import load_study
from narrative_eval.sweep import expand_grid

QUICKSTART = Path(__file__).resolve().parents[1] / "experiments" / "configs" / "quickstart.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=QUICKSTART)
    parser.add_argument("--cache", type=Path, default=None, help="request cache (default: the platform's)")
    args = parser.parse_args()
    config = load_config(args.config)
    cells = expand_grid(config)
    study = load_study(config.study)
    cache = RequestCache(args.cache)
    for judge in config.judges:
        for scoring in ("sampled", "expected"):
            spec = judge.model_copy(update={"scoring": scoring})
            start = time.perf_counter()
            judgments = [judgment for group in study.control_items(config, cells, spec, config.judge_checks.items)
                         for judgment in judge_controls(CachedBackend(get_backend(group.judge.model), cache),
                                                        group.judge, group.items)]
            seconds = time.perf_counter() - start
            print(f"\n{judge.id}, scoring: {scoring} ({len(judgments)} control items, {seconds:.0f} s)")
            print(judge_checks_table(check_rows(judge.id, judgments)).to_string(index=False))


if __name__ == "__main__":
    main()
