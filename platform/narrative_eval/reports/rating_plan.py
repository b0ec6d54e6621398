"""`python -m experiments.report rating-plan`: how many more human ratings each cell of a sweep needs.

  python -m experiments.report rating-plan --sweep NAME --target-width W [--ratings FILE] [--data FILE] [--out DIR]

For every judge of the sweep, cell and judge dimension, from the ratings so far (stats.rating_plan): the rated
outputs PPI++ needs in all and beyond those rated for a 95% interval of full width W, what the human-only mean
would need instead, and the judge-only interval's width (no rating; it carries the judge's bias, estimated beside
it). Written as rating_plan_<judge>.csv, .md and .tex (columns in docs/formats.md) to --out (default
reports/<sweep>/). The study says where its ratings are (its `Study.anchored_outputs`): for infilling the app's
annotation store or a ratings CSV (--ratings), for incremental delivery a pointwise ratings file (--ratings); any
other single-turn study is rated in the app from its declaration, so its ratings are read as its default report reads
them (reports.single_turn.anchored_sweep: the store, or a ratings CSV).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from narrative_eval import tracking
from narrative_eval.errors import UserError
from narrative_eval.evaluation import SingleTurnStudy
from narrative_eval.reports.labels import sweep_rubrics
from narrative_eval.reports.single_turn import anchored_sweep
from narrative_eval.reports.tables import file_slug, write_table
from narrative_eval.stats.rating_plan import rating_plan_table
from narrative_eval.study import ReportCommand, Study, all_studies, experiment_of

NAME = "rating-plan"
"""The subcommand's name."""


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sweep", required=True, help="sweep name (the parent run)")
    parser.add_argument("--target-width", type=float, required=True, metavar="W",
                        help="full width of the 95%% interval wanted on each dimension (e.g. 0.5 on a 1-5 scale)")
    parser.add_argument("--ratings", help="human ratings in the sweep's study's format (default: the app's store)")
    parser.add_argument("--data", help="only the cells run on this data file (a sweep name reused on other data)")
    parser.add_argument("--out", help="output folder (default reports/<sweep>/)")


def study_of_sweep(sweep: str) -> Study:
    """The study whose experiment holds the sweep's parent run."""
    for study in all_studies():
        if tracking.find_sweep_run(experiment_of(study.name), sweep) is not None:
            return study
    raise UserError(f"no sweep named {sweep!r} in {tracking.tracking_uri()}")


def run(args: argparse.Namespace, data_sha256: str | None) -> dict[str, str]:
    if not args.target_width > 0:
        raise UserError(f"--target-width must be a positive width, not {args.target_width:g}")
    study = study_of_sweep(args.sweep)
    try:
        anchored = study.anchored_outputs(args.sweep, data_sha256, args.ratings)
        if anchored is None and isinstance(study, SingleTurnStudy):  # rated in the app from its declaration
            anchored = anchored_sweep(study, args.sweep, data_sha256, args.ratings)
    except ValueError as error:  # no finished cell run
        raise UserError(str(error)) from None
    if anchored is None:
        raise UserError(f"the {study.name} study's outputs are not rated by people: no rating plan")
    if not anchored:
        raise UserError(f"sweep {args.sweep!r} has no judge: a rating plan needs the judge's scores of every output")
    args.out = args.out or str(Path("reports") / args.sweep)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {}
    for outputs in anchored:
        table = rating_plan_table(outputs.outputs, outputs.cell_keys, outputs.dimensions, outputs.cluster,
                                  args.target_width)
        tables[f"Rating plan for an interval of width {args.target_width:g} [{outputs.judge}]"] = write_table(
            table, out, f"rating_plan_{file_slug(outputs.judge)}", sweep_rubrics(study))
    return tables


COMMAND = ReportCommand(NAME, "how many more human ratings each cell needs for an interval of a target width",
                        arguments, run, files=(("ratings", "ratings file"), ("data", "data file")))
"""The subcommand, listed after every study's own."""

__all__ = ["COMMAND", "study_of_sweep"]
