"""python -m narrative_eval.metrics.wordnet: install WordNet for NLTK and check METEOR scores with it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from narrative_eval.metrics.base import METRICS
from narrative_eval.metrics.wordnet import WordNetUnavailable, ensure_wordnet, verify_wordnet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m narrative_eval.metrics.wordnet",
        description="Install WordNet for NLTK from the system's wordnet-base package and check METEOR works.",
    )
    parser.add_argument("--nltk-data", type=Path, default=None, help="NLTK data directory (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        root = ensure_wordnet(args.nltk_data)
        count = verify_wordnet()
    except WordNetUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    # Through the registry: the METEOR module imports this package, so this command does not import it.
    [exact] = METRICS.get("meteor")().score(["the cat sat on the mat"], ["the cat sat on the mat"])
    print(f"WordNet ready in {root / 'corpora' / 'wordnet'}: {count} synsets for 'dog'; METEOR(exact) = {exact:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
