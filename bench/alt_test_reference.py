"""The alternative annotator test (stats.alt_test) on the reference repository's example data, beside its
published numbers.

  python bench/alt_test_reference.py PATH      # PATH: a checkout of github.com/nitaytech/AltTest

The repository has no licence file, so its data are not copied into this project: the script reads them from a
checkout. It runs the four numeric datasets (scored, as in the paper, by the negative RMSE to the remaining raters)
with each dataset's epsilon from the repository's example notebook, and prints each judge's winning rate and
advantage probability beside the notebook's published output (two decimals), flagging any difference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from narrative_eval.stats.alt_test import alternative_annotator_test

EPSILONS = {"summeval": 0.2, "10k_prompts": 0.15, "cebab_stars": 0.1, "lesion": 0.15}
"""The numeric datasets of the notebook and the epsilon it gives each."""

PUBLISHED = {  # (winning rate, advantage probability), the notebook's printed output
    "summeval": {"gemini_flash": (0.00, 0.46), "gemini_pro": (0.00, 0.44), "gpt-4o": (0.00, 0.48),
                 "llama-31": (0.00, 0.58), "gpt-4o-mini": (0.00, 0.54), "mistral-v03": (0.00, 0.62)},
    "10k_prompts": {"gemini_flash": (0.31, 0.67), "gemini_pro": (0.08, 0.63), "gpt-4o": (0.69, 0.76),
                    "llama-31": (0.15, 0.67), "gpt-4o-mini": (0.92, 0.80), "mistral-v03": (0.15, 0.67)},
    "cebab_stars": {"gemini_flash": (0.60, 0.82), "gemini_pro": (0.80, 0.87), "gpt-4o": (0.90, 0.90),
                    "llama-31": (0.60, 0.85), "gpt-4o-mini": (0.90, 0.89), "mistral-v03": (0.50, 0.83)},
    "lesion": {"gemini_flash": (0.17, 0.71), "gemini_pro": (1.00, 0.81), "gpt-4o": (0.00, 0.62),
               "gpt-4o-mini": (0.67, 0.73)},
}


def main(root: Path) -> int:
    differ = 0
    print(f"{'dataset':12} {'judge':13} {'eps':>5} {'raters':>6} {'outputs':>7}  {'WR':>5} {'ref':>5}  {'AP':>5} {'ref':>5}")
    for dataset, epsilon in EPSILONS.items():
        humans = json.loads((root / "data" / dataset / "human_annotations.json").read_text())
        judges = json.loads((root / "data" / dataset / "llm_annotations.json").read_text())
        raters = sorted(humans)
        outputs = sorted({i for ratings in humans.values() for i in ratings})
        matrix = np.array([[float(humans[r].get(i, np.nan)) for i in outputs] for r in raters])
        for judge, scores in judges.items():
            result = alternative_annotator_test(matrix, [float(scores.get(i, np.nan)) for i in outputs], raters,
                                                epsilon=epsilon)
            wr, ap = PUBLISHED[dataset][judge]
            same = round(result.winning_rate, 2) == wr and round(result.advantage_probability, 2) == ap
            differ += not same
            print(f"{dataset:12} {judge:13} {epsilon:5.2f} {result.n_raters:6d} {result.n_outputs:7d}  "
                  f"{result.winning_rate:5.2f} {wr:5.2f}  {result.advantage_probability:5.2f} {ap:5.2f}"
                  f"{'' if same else '  DIFFERS'}")
    print(f"{differ} of {sum(map(len, PUBLISHED.values()))} judges differ from the published numbers")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    raise SystemExit(main(Path(sys.argv[1])))
