"""Tables and figures of a sweep: one subcommand per report of every registered study (plugins included).

  python -m experiments.report infilling --sweep NAME --out DIR [--data FILE] [--mde-target DELTA] [--reference NAME]
      [--ratings FILE.csv | --annotations FILE.sqlite]
  python -m experiments.report creative-integrity (--sweep NAME [--data FILE] | --scores FILE.jsonl) --out DIR
  python -m experiments.report human-validation [--scores records.jsonl | --sweep NAME [--data FILE]]
      [--pointwise ratings.jsonl] [--pairwise verdicts.jsonl [--cases cases.jsonl]] [--reference RATER] --out DIR
  python -m experiments.report STUDY --sweep NAME --out DIR [--data FILE]     (a study with no report of its own)
  python -m experiments.report rating-plan --sweep NAME --target-width W [--ratings FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.data.files import file_sha256
from narrative_eval.errors import UserError, add_debug_flag, cli_main, require_file
from narrative_eval.reports import rating_plan
from narrative_eval.reports.catalog import record_report_source
from narrative_eval.reports.tables import MISSING_TABLES, missing_tables
from narrative_eval.stats.reference import load_reference
from narrative_eval.study import ReportCommand, all_studies


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kind", required=True)
    add_debug_flag(parser)
    taken: set[str] = set()
    commands = [(study.name, command) for study in all_studies() for command in study.report_commands()]
    # The rating plan serves every study, after theirs: it reports none (no study named in its folder).
    for study_name, command in [*commands, (None, rating_plan.COMMAND)]:
        names = [name for name in (command.name, *command.aliases) if name not in taken]
        if not names or names[0] != command.name:
            continue  # a name another study's report already has: the first registered keeps it
        taken.update(names)
        child = sub.add_parser(command.name, aliases=names[1:], help=command.help)
        command.add_arguments(child)
        child.set_defaults(command=command, study=study_name)
        add_debug_flag(child)
    return parser.parse_args(argv)


def check_inputs(args: argparse.Namespace, command: ReportCommand) -> None:
    """Every input file named on the command line exists and is text; the sweep exists in MLflow."""
    problems: list[str] = []
    for dest, what in command.files:
        require_file(getattr(args, dest, None), what, problems)
    if isinstance(getattr(args, "reference", None), str):
        try:
            load_reference(args.reference)
        except UserError as error:
            problems.extend(error.problems)
    if getattr(args, "sweep", None):
        known = tracking.all_sweeps()
        if args.sweep not in known:
            problems.append(f"no sweep named {args.sweep!r} in {tracking.tracking_uri()}; known: {', '.join(known) or 'none'}")
    if problems:
        raise UserError(problems)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command: ReportCommand = args.command
    check_inputs(args, command)
    data_sha256 = file_sha256(args.data) if getattr(args, "data", None) else None
    tables = command.run(args, data_sha256)
    if args.study is not None and getattr(args, "out", None):
        record_report_source(Path(args.out), args.study, getattr(args, "sweep", None))
    for title, markdown in tables.items():
        print(f"## {title}\n{markdown}\n")
    missing = missing_tables(Path(args.out))
    if missing:  # each says why under its entry above; this line says the report is incomplete
        print(f"incomplete report: {len(missing)} table(s) not written ({', '.join(missing)}); why in "
              f"{args.out}/{MISSING_TABLES}")
    print(f"written to {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli_main(main))
