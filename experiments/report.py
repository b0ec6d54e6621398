"""Tables and figures of a sweep.

  python -m experiments.report infilling --sweep NAME --out DIR [--data FILE] [--mde-target DELTA] [--reference NAME]
      [--ratings FILE.csv | --annotations FILE.sqlite]
  python -m experiments.report creative-integrity (--sweep NAME [--data FILE] | --scores FILE.jsonl) --out DIR
  python -m experiments.report human-validation [--scores records.jsonl | --sweep NAME [--data FILE]]
      [--pointwise ratings.jsonl] [--pairwise verdicts.jsonl [--cases cases.jsonl]] [--reference RATER] --out DIR
"""

from __future__ import annotations

import argparse

from narrative_eval.errors import UserError, add_debug_flag, cli_main, require_file


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kind", required=True)
    infilling = sub.add_parser("infilling", help="tables and figures of an infilling sweep, from MLflow")
    infilling.add_argument("--sweep", required=True, help="sweep name (the parent run)")
    infilling.add_argument("--out", required=True, help="output folder")
    infilling.add_argument("--data", help="report only the cells run on this data file (when the sweep name was "
                                          "reused on other data)")
    infilling.add_argument("--mde-target", type=float, metavar="DELTA",
                           help="a difference of AtAvg or QAvg (e.g. 0.01): mde.csv adds the instances needed to detect it")
    infilling.add_argument("--reference", metavar="NAME",
                           help="reference rows beside the main table: a name under data/reference/ (published) or a CSV")
    humans = infilling.add_mutually_exclusive_group()
    humans.add_argument("--ratings", help="human ratings CSV (rater, model, prompt_setting, instance_id, seed, one 1-5 "
                                          "column per dimension) for the human-agreement table")
    humans.add_argument("--annotations", help="the app's annotation store (default: .cache/annotations.sqlite, if present)")
    creative = sub.add_parser("creative-integrity", help="tables and figures of a FULL/SHARDED study")
    source = creative.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep", help="incremental-delivery sweep name, read from MLflow")
    source.add_argument("--scores", help="score records JSONL (format: docs/formats.md)")
    creative.add_argument("--out", required=True, help="output folder")
    creative.add_argument("--data", help="with --sweep: report only the cells run on this task file")
    creative.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    creative.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    human = sub.add_parser("human-validation", help="human validation of a FULL/SHARDED study: pointwise ratings "
                                                    "and pairwise verdicts (formats: docs/formats.md)")
    records = human.add_mutually_exclusive_group()
    records.add_argument("--scores", help="score records JSONL: the responses the pointwise ratings name (record_id)")
    records.add_argument("--sweep", help="incremental-delivery sweep whose score records the ratings name; the tables "
                                         "are attached to its parent run")
    human.add_argument("--data", help="with --sweep: only the cells run on this task file")
    human.add_argument("--pointwise", help="pointwise human ratings JSONL (record_id, rater, five 1-5 dimensions)")
    human.add_argument("--pairwise", help="pairwise verdicts JSONL (case_id, rater, order, two five-level verdicts)")
    human.add_argument("--cases", help="with --pairwise: pairwise cases JSONL (case_id, record_a, record_b)")
    human.add_argument("--reference", dest="reference_rater", metavar="RATER",
                       help="the rater every other is compared with in pairwise_agreement (default: the only non-judge)")
    human.add_argument("--out", required=True, help="output folder")
    human.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    human.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    for command in (parser, infilling, creative, human):
        add_debug_flag(command)
    return parser.parse_args(argv)


def check_inputs(args: argparse.Namespace) -> None:
    """Every input file named on the command line exists and is text; the sweep exists in MLflow."""
    problems: list[str] = []
    require_file(getattr(args, "ratings", None), "ratings file", problems)
    require_file(getattr(args, "scores", None), "score file", problems)
    require_file(getattr(args, "data", None), "data file", problems)
    for name in ("pointwise", "pairwise", "cases"):
        require_file(getattr(args, name, None), f"{name} file", problems)
    if getattr(args, "reference", None):
        from narrative_eval.stats.reference import load_reference

        try:
            load_reference(args.reference)
        except UserError as error:
            problems.extend(error.problems)
    if getattr(args, "sweep", None):
        from narrative_eval import tracking

        known = tracking.all_sweeps()
        if args.sweep not in known:
            problems.append(f"no sweep named {args.sweep!r} in {tracking.tracking_uri()}; known: {', '.join(known) or 'none'}")
    if problems:
        raise UserError(problems)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_inputs(args)
    data_sha256 = None
    if getattr(args, "data", None):
        from narrative_eval.data.infilling import file_sha256

        data_sha256 = file_sha256(args.data)
    if args.kind == "human-validation":
        from narrative_eval.reports import human_validation

        options = {"pointwise": args.pointwise, "pairwise": args.pairwise, "cases": args.cases,
                   "reference": args.reference_rater, "n_boot": args.resamples, "seed": args.seed}
        if args.sweep:
            tables = human_validation.human_validation_from_sweep(args.sweep, args.out, data_sha256=data_sha256, **options)
        else:
            tables = human_validation.write_human_validation_report(args.out, scores=args.scores, **options)
    elif args.kind == "infilling":
        from narrative_eval.reports.infilling import write_infilling_report

        tables = write_infilling_report(args.sweep, args.out, ratings_csv=args.ratings, annotations_path=args.annotations,
                                        data_sha256=data_sha256, mde_target=args.mde_target, reference=args.reference)
    else:
        from narrative_eval.reports.creative import creative_report_from_scores, creative_report_from_sweep

        if args.scores:
            tables = creative_report_from_scores(args.scores, args.out, n_boot=args.resamples, seed=args.seed)
        else:
            tables = creative_report_from_sweep(args.sweep, args.out, n_boot=args.resamples, seed=args.seed,
                                                data_sha256=data_sha256)
    for title, markdown in tables.items():
        print(f"## {title}\n{markdown}\n")
    print(f"written to {args.out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli_main(main))
