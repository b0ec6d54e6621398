"""The narrative-infilling study declared: its instances as items (the passage with its blank shown to judges,
the gold fill as the reference), its prompt settings' rendering, its extraction step; its config, control items
and report command. The library's loop (narrative_eval.evaluation) runs its cells and writes its MLflow records."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from narrative_eval.data.instances import domain
from narrative_eval.evaluation import ANSWER, Answer, Item, Sample, SingleTurnStudy
from narrative_eval.judges.checks import ControlSet
from narrative_eval.prompts.render import PromptSettings
from narrative_eval.records import CellSpec, JudgeSpec, Message
from narrative_eval.reports.labels import labels
from narrative_eval.stats.alt_test import EPSILON, EPSILON_HELP
from narrative_eval.stats.cell_scores import passage_of
from narrative_eval.stats.ppi import AnchoredOutputs
from narrative_eval.studies.infilling.cell import select_instances
from narrative_eval.studies.infilling.config import InfillingConfig
from narrative_eval.studies.infilling.controls import sweep_controls
from narrative_eval.studies.infilling.extraction import extract_answer
from narrative_eval.studies.infilling.live import InfillingLiveForm
from narrative_eval.studies.infilling.positions import blank_position
from narrative_eval.studies.infilling.prompts import prompt_file_for, render_infilling
from narrative_eval.studies.infilling.report import anchored_sweep, write_infilling_report
from narrative_eval.studies.infilling.vocabulary import EXTRACTED, ID_COLUMN, NAME, PUBLISHED_SOURCE, RUBRIC, STATUSES
from narrative_eval.study import ReportCommand, SweepSettings, study, sweep_arguments


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
    parser.add_argument("--alt-test-epsilon", type=float, default=EPSILON, metavar="EPSILON",
                        help=EPSILON_HELP)


def run_report(args: argparse.Namespace, data_sha256: str | None) -> dict[str, str]:
    return write_infilling_report(args.sweep, args.out, ratings_csv=args.ratings, annotations_path=args.annotations,
                                  data_sha256=data_sha256, mde_target=args.mde_target, reference=args.reference,
                                  alt_test_epsilon=args.alt_test_epsilon)


@study(NAME)
class InfillingStudy(SingleTurnStudy):
    config_section = InfillingConfig
    published_reference = ("published", PUBLISHED_SOURCE)
    rubric = RUBRIC
    judge_sees = {"problem": "problem", "candidate": ANSWER}  # the passage with its blank and the fill, nothing else
    reference = "gold"
    id_column, items_name, trace_name = ID_COLUMN, "instances", "infill"
    answers_name = "fills"

    def items(self, cell: CellSpec) -> list[Item]:
        """The instances after the subset and the limit; rows carry their dataset, domain, blank position and n."""
        return [Item(inst.instance_id, {"problem": inst.problem}, {"gold": inst.gold_answer},
                     {"dataset": inst.dataset, "domain": domain(inst.dataset), "position": blank_position(inst),
                      "n": inst.n}, record=inst) for inst in select_instances(cell)]

    def prompt_file(self, cell: CellSpec) -> PromptSettings:
        return prompt_file_for(cell.prompt_setting, cell.extra.get("prompt_file"))

    def messages(self, cell: CellSpec, item: Item) -> list[Message]:
        return render_infilling(cell.prompt_setting, item.record, cell.extra.get("prompt_file"))

    def answer(self, cell: CellSpec, item: Item, reply: str) -> Answer:
        """The fill extracted from the reply, with how it was found (an answer equal to a format example is none)."""
        found = extract_answer(reply, item.record.problem, self.prompt_file(cell).example_answers)
        return Answer(found.answer, found.status)

    def answer_rates(self, samples: Sequence[Sample]) -> dict[str, float]:
        total = len(samples) or 1
        rates = {"extraction_success_rate": sum(s.answer.status in EXTRACTED for s in samples) / total}
        return rates | {f"extraction_{status}_rate": sum(s.answer.status == status for s in samples) / total
                        for status in STATUSES}

    def interval_cluster(self, item: Item) -> str:
        """Its passage: instances cut from one passage are drawn together."""
        return passage_of(item.id)

    def headline_labels(self, names: Sequence[str]) -> dict[str, str]:
        return labels(names)

    def control_items(self, config: SweepSettings, cells: Sequence[CellSpec], judge: JudgeSpec,
                      k: int) -> list[ControlSet]:
        """Each of K instances' gold fill against another passage's gold and against a repeated sentence."""
        return sweep_controls(cells, judge, k)

    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        return write_infilling_report(sweep, out_dir, data_sha256=data_sha256)

    def report_commands(self) -> list[ReportCommand]:
        return [ReportCommand(NAME, f"tables and figures of an {NAME} sweep, from MLflow", report_arguments, run_report,
                              files=(("ratings", "ratings file"), ("data", "data file")))]

    def anchored_outputs(self, sweep: str, data_sha256: str | None = None,
                         ratings: str | Path | None = None) -> list[AnchoredOutputs]:
        """Its fills, with the ratings of a CSV (`ratings`) or else of the app's annotation store."""
        return anchored_sweep(sweep, data_sha256, ratings)

    def live_form(self) -> InfillingLiveForm:
        """A passage with one blank, its gold text and n, instead of the template's slots."""
        return InfillingLiveForm(self)
