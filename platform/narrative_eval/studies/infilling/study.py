"""The narrative-infilling study as the sweep sees it: its config, cells, MLflow records and report command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from narrative_eval.judges.checks import ControlSet
from narrative_eval.metrics import METRICS
from narrative_eval.prompts.render import prompt_file_for
from narrative_eval.records import CellSpec, JudgeSpec
from narrative_eval.reports.labels import labels
from narrative_eval.studies.infilling.cell import run_cell, select_instances, stages
from narrative_eval.studies.infilling.config import InfillingConfig
from narrative_eval.studies.infilling.controls import sweep_controls
from narrative_eval.studies.infilling.report import write_infilling_report
from narrative_eval.studies.infilling.tracing import infilling_records
from narrative_eval.studies.infilling.vocabulary import AT_AVG, JUDGE_HEADLINES, NAME, PUBLISHED_SOURCE
from narrative_eval.study import CellResult, ReportCommand, Runtime, Study, study, sweep_arguments
from narrative_eval.tracing import CellRecords


def report_arguments(parser: argparse.ArgumentParser) -> None:
    """`python -m experiments.report infilling` arguments."""
    sweep_arguments(parser, NAME)
    parser.add_argument("--mde-target", type=float, metavar="DELTA",
                        help="a difference of AtAvg or QAvg (e.g. 0.01): mde.csv adds the instances needed to detect it")
    parser.add_argument("--reference", metavar="NAME",
                        help="reference rows beside the main table: a name under data/reference/ (published) or a CSV")
    humans = parser.add_mutually_exclusive_group()
    humans.add_argument("--ratings", help="human ratings CSV (rater, model, prompt_setting, instance_id, seed, one 1-5 "
                                          "column per dimension) for the human-agreement table")
    humans.add_argument("--annotations", help="the app's annotation store (default: .cache/annotations.sqlite, if present)")


def run_report(args: argparse.Namespace, data_sha256: str | None) -> dict[str, str]:
    return write_infilling_report(args.sweep, args.out, ratings_csv=args.ratings, annotations_path=args.annotations,
                                  data_sha256=data_sha256, mde_target=args.mde_target, reference=args.reference)


@study(NAME)
class InfillingStudy(Study):
    config_section = InfillingConfig
    published_reference = ("published", PUBLISHED_SOURCE)

    def count_requests(self, cell: CellSpec) -> int:
        return len(select_instances(cell))

    def count_judged(self, cell: CellSpec) -> int:
        return len(select_instances(cell))

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        return run_cell(cell, runtime)

    def progress_stages(self, cell: CellSpec) -> list[str]:
        return stages(cell)

    def headline_metrics(self, judges: Sequence[str]) -> list[str]:
        """AtAvg, every registered metric, then each judge's QAvg and High%."""
        return [AT_AVG, *METRICS.names(), *(f"judge/{j}/{h}" for j in judges for h in JUDGE_HEADLINES)]

    def headline_labels(self, names: Sequence[str]) -> dict[str, str]:
        return labels(names)

    def cell_records(self, cell: CellSpec, result: CellResult) -> CellRecords:
        return infilling_records(cell, result)

    def used_templates(self, cell: CellSpec, result: CellResult) -> dict[str, Any]:
        """The prompt setting (system and user template), then the rubrics."""
        prompts = prompt_file_for(cell.prompt_setting, cell.extra.get("prompt_file"))
        user = prompts.settings[cell.prompt_setting]["user"]
        return {f"{NAME}.{cell.prompt_setting}": [{"role": "system", "content": prompts.system},
                                                  {"role": "user", "content": user}],
                **super().used_templates(cell, result)}

    def control_items(self, config: Any, cells: Sequence[CellSpec], judge: JudgeSpec, k: int) -> list[ControlSet]:
        """Each of K instances' gold fill against another passage's gold and against a repeated sentence."""
        return sweep_controls(cells, judge, k)

    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        return write_infilling_report(sweep, out_dir, data_sha256=data_sha256)

    def report_commands(self) -> list[ReportCommand]:
        return [ReportCommand(NAME, f"tables and figures of an {NAME} sweep, from MLflow", report_arguments, run_report,
                              files=(("ratings", "ratings file"), ("data", "data file")))]
