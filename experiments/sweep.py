"""Run a sweep: `python -m experiments.sweep --config experiments/configs/quickstart.yaml`.

Expands the config's grid, runs each cell as one MLflow run under one parent run, skips cells
already finished, and writes the study's tables at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

from experiments.progress import Stopped, plain_progress, request_stop, tqdm_progress
from narrative_eval import tracking
from narrative_eval.backends.registry import BACKENDS
from narrative_eval.config import SweepConfig, default_grid_names, load_config
from narrative_eval.errors import ServiceUnavailable, UserError, add_debug_flag, cli_main, require_file
from narrative_eval.executors import EXECUTORS
from narrative_eval.judges.rubric import RUBRICS
from narrative_eval.metrics import METRICS
from narrative_eval.prompts.render import PROMPT_SETTINGS
from narrative_eval.registry import Registry
from narrative_eval.reports.judge_checks import JUDGE_CHECKS_NAME, failed_checks
from narrative_eval.stats.judge_checks import CheckRow
from narrative_eval.stats.mde import mde_summary, plan_from
from narrative_eval.study import STUDIES, all_studies, load_study
from narrative_eval.sweep import checked_grid, collect_batches, estimate_lines, expand_grid, plan_warnings, run_sweep


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="sweep config YAML (see experiments/configs/)")
    parser.add_argument("--list", action="store_true",
                        help="list everything registered (studies, metrics, backends, rubrics, prompt settings, "
                             "conditions, executors), plugins included, with where each comes from")
    parser.add_argument("--data", help="instances/tasks file replacing the config's data (published columns accepted)")
    parser.add_argument("--limit", type=int, help="keep only the first N instances/tasks (N >= 1)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value, YAML-parsed; dotted keys reach nested values "
                             "(e.g. --set models=[smollm2] --set generation.temperature=0.5)")
    parser.add_argument("--executor", help="cell executor (local or ray); default from the config")
    parser.add_argument("--dry-run", action="store_true", help="print the grid, the counts and the cost estimates, load no model")
    parser.add_argument("--variance-from", metavar="MDE_CSV",
                        help="with --dry-run: an earlier sweep's report mde.csv; prints this grid's minimum detectable "
                             "effects from its measured variance, before anything is generated")
    parser.add_argument("--mde-target", type=float, metavar="DELTA",
                        help="with --variance-from: also print the instances a difference of DELTA needs")
    parser.add_argument("--batch", action="store_true",
                        help="send every hosted model's and judge's requests through the provider's batch API (about half price)")
    parser.add_argument("--collect", action="store_true",
                        help="read finished provider batches of this config's models into the request cache; start nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--catalog", help="model catalog YAML (default: the repository's experiments/configs/models.yaml)")
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    if not args.list and not args.config:
        parser.error("--config is required (or --list)")
    return args


def all_registries() -> dict[str, Registry[Any]]:
    """Every registry of the project, by kind (the listing of `experiments.sweep --list`)."""
    return {
        registry.kind: registry
        for registry in (STUDIES, METRICS, BACKENDS, RUBRICS, PROMPT_SETTINGS,
                         *(own for study in all_studies() for own in study.registries()), EXECUTORS)
    }


def listing() -> str:
    """Everything registered, kind by kind: name, aliases and origin (what `experiments.sweep --list` prints)."""
    lines = []
    for kind, registry in all_registries().items():
        lines.append(f"{kind} ({len(registry)}):")
        for entry in registry.entries():
            aliases = f" (also: {', '.join(entry.aliases)})" if entry.aliases else ""
            lines.append(f"  {entry.name}{aliases}  [{entry.origin}]")
    lines.append("grids (each study's prompt settings and conditions; * marks a default):")
    for study in STUDIES.names():
        for key, (names, default) in default_grid_names(study).items():
            shown = "any name (the study checks them)" if names is None else \
                " ".join(f"{name}*" if name in default else name for name in names)
            lines.append(f"  {study} {key}: {shown}")
    return "\n".join(lines)


def print_plan(config: SweepConfig, mde_csv: str, target: float | None) -> None:
    """The grid's minimum detectable effects (80% power, alpha 0.05) from an earlier sweep's variance."""
    problems: list[str] = []
    require_file(mde_csv, "--variance-from file", problems)
    if problems:
        raise UserError(problems)
    n_instances = load_study(config.study).count_requests(expand_grid(config)[0])
    print(f"planned from the variance in {mde_csv}:")
    for line in plan_from(mde_csv, n_instances, target):
        print(f"  {line}")


def _run_stoppable(config: SweepConfig, progress, executor: str | None):
    """run_sweep, ending this process's open runs KILLED when stopped (FAILED on a crash) instead of RUNNING forever."""
    signal.signal(signal.SIGTERM, request_stop)
    try:
        return run_sweep(config, progress=progress, executor=executor)
    except BaseException as error:
        stopped = isinstance(error, KeyboardInterrupt)
        ended = tracking.end_open_runs("KILLED" if stopped else "FAILED")
        # A user error (a broken model, bad data) is fixed before a rerun, and its `error:` line says so; the
        # resume hint is for a crash or a stop, and for a user error only when it left runs to resume.
        if not isinstance(error, UserError) or ended:
            print(f"\nsweep {'stopped' if stopped else 'failed'}: {len(ended)} open run(s) marked "
                  f"{'KILLED' if stopped else 'FAILED'}; "
                  f"{'once the error below is fixed, ' if isinstance(error, UserError) else ''}"
                  "rerun the same command to resume", file=sys.stderr)
        if isinstance(error, Stopped):
            # Die of the signal, so whoever sent it (the app's job runner) sees a cancelled, not a failed, sweep.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        if isinstance(error, Exception) and tracking.unreachable(error):
            raise ServiceUnavailable(f"the tracking server at {tracking.tracking_uri()} stopped answering "
                                     f"({type(error).__name__}); when it is back, rerun the same command: finished "
                                     "cells are skipped and the interrupted one resumes in its own run") from error
        raise


def judge_check_lines(rows: list[CheckRow], report_dir: Any) -> list[str]:
    """The terminal's verdict per judge: passed, or FAILED with one line per failed check (failed_checks)."""
    if not rows:
        return []
    where = f"{report_dir}/{JUDGE_CHECKS_NAME}.csv" if report_dir else "the sweep's parent run"
    lines = [f"judge control checks ({where}; docs/judge-checks.md):"]
    for judge in dict.fromkeys(row.judge for row in rows):
        failed = failed_checks([row for row in rows if row.judge == judge])
        lines.append(f"  {judge}: " + ("FAILED - its scores are marked in the report" if failed else "passed every check"))
        lines.extend(f"    {line}" for line in failed)
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.list:
        print(listing())
        return 0
    overrides = args.overrides + (["batch=true"] if args.batch else [])
    config = load_config(args.config, overrides, data=args.data, limit=args.limit, catalog=args.catalog)
    if args.collect:
        news = collect_batches(config)
        print("\n".join(news) if news else "no provider batch in flight for this config's models")
        return 0
    grid = checked_grid(config)
    if args.dry_run:
        print(f"sweep {config.sweep!r} ({config.study}): {len(grid['cells'])} cells, seeds {config.seeds}")
        print(f"{'model':<28} {'setting':<16} {'condition':<10} spec hash")
        for model, setting, condition, digest in grid["cells"]:
            print(f"{model:<28} {setting:<16} {condition:<10} {digest}")
        print("\n".join(estimate_lines(config, grid)))
        for line in plan_warnings(config):
            print(f"warning: {line}")
        if args.variance_from:
            print_plan(config, args.variance_from, args.mde_target)
        return 0

    progress = plain_progress if args.no_progress else tqdm_progress
    outcome = _run_stoppable(config, progress, args.executor)
    print()
    for title, markdown in outcome.tables.items():
        print(f"## {title}\n{markdown}\n")
    finished, skipped, failed = outcome.count("finished"), outcome.count("skipped"), outcome.count("failed")
    print(f"cells: {finished} finished, {skipped} already done (skipped), {failed} failed; "
          f"requests sent to engines: {outcome.generated}")
    for line in judge_check_lines(outcome.judge_checks, outcome.report_dir):
        print(line)
    for cell in outcome.cells:
        if cell.status == "failed":
            print(f"FAILED {cell.cell.run_name}: {cell.error}", file=sys.stderr)
    print(f"MLflow: {tracking.tracking_uri()} - experiment {config.study!r}, parent run {outcome.parent_run_id} "
          f"(`mlflow ui` from the repo root shows it)")
    if outcome.report_dir:
        detectable = mde_summary(outcome.report_dir / "mde.csv")
        if detectable:
            print(detectable)
        print(f"report: {outcome.report_dir}/")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(cli_main(main))
