"""How long the sweep command takes to answer when it runs nothing: `--help`, `--list` and the quickstart's
`--dry-run`, each in a fresh interpreter, with the machine's load beside the figures.

These commands read the registries and the config and load no model; what they wait for is imports. MLflow, pandas
and scipy.stats are imported by the steps that use them (`narrative_eval.lazy`), so none of the three commands pays
for them; `--imports` also prints which heavy libraries each command imported (none is the expectation).

Target on an idle 2-core machine: `--help` within 1 s, `--list` within 2 s, `--dry-run` within 3 s.
Usage: python bench/command_latency.py [--repeats 5] [--imports]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._common import REPO  # noqa: E402

COMMANDS = {
    "--help": ["--help"],
    "--list": ["--list"],
    "quickstart --dry-run": ["--config", "experiments/configs/quickstart.yaml", "--dry-run"],
}
HEAVY = ("mlflow", "pandas", "scipy.stats", "torch", "transformers", "matplotlib")
"""Libraries none of these commands should import."""

REPORT_IMPORTS = "import runpy, sys; sys.argv = ['experiments.sweep', *sys.argv[1:]]\n" \
                 "try:\n    runpy.run_module('experiments.sweep', run_name='__main__')\nexcept SystemExit:\n    pass\n" \
                 f"print('heavy:', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"


def seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "experiments.sweep", *argv], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def heavy_imports(argv: list[str]) -> str:
    done = subprocess.run([sys.executable, "-c", REPORT_IMPORTS, *argv], cwd=REPO, check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return done.stderr.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--imports", action="store_true", help="also print the heavy libraries each command imported")
    args = parser.parse_args()
    seconds(["--help"])  # the first run after an install compiles bytecode; it is not what a user waits for twice
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.repeats} runs each")
    for name, argv in COMMANDS.items():
        times = [seconds(argv) for _ in range(args.repeats)]
        line = f"{name:<22} median {statistics.median(times):.2f} s  (min {min(times):.2f}, max {max(times):.2f})"
        if args.imports:
            line += f"  {heavy_imports(argv)}"
        print(line)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
