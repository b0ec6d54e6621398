"""The incremental-delivery study declared (items, solver, scorers), with its config, MLflow records, the pairwise
judges after its cells, and its report commands (creative-integrity, human-validation)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from narrative_eval.evaluation import ANSWER, Item
from narrative_eval.judges.checks import ControlSet
from narrative_eval.multi_turn import TOKENS_PER_WORD, Conversation, MultiTurnStudy
from narrative_eval.prompts.render import PROMPT_SETTINGS
from narrative_eval.records import CellSpec, JudgeSpec, ModelSpec
from narrative_eval.records.keys import judge_key
from narrative_eval.registry import Registry
from narrative_eval.stats.alt_test import EPSILON, EPSILON_HELP
from narrative_eval.stats.ppi import AnchoredOutputs
from narrative_eval.reports.labels import labels
from narrative_eval.studies.incremental.cell_tasks import select_tasks
from narrative_eval.studies.incremental.config import IncrementalConfig, pairwise_names, pairwise_problems
from narrative_eval.studies.incremental.controls import control_requests, sweep_controls
from narrative_eval.studies.incremental.conversations import CONVERSATIONS
from narrative_eval.studies.incremental.judged import record_scores, score_record
from narrative_eval.studies.incremental.pairwise import count_pairs, run_pairwise_judges
from narrative_eval.studies.incremental.records import ScoreRecord
from narrative_eval.studies.incremental.report import (
    creative_report_from_scores,
    creative_report_from_sweep,
    with_sweep_checks,
)
from narrative_eval.studies.incremental.report_human import (
    anchored_sweep_responses,
    human_validation_from_sweep,
    write_human_validation_report,
)
from narrative_eval.studies.incremental.turns import (
    CONDITIONS,
    DEFAULT_SYSTEM_PROMPTS_FILE,
    DEFAULT_TURNS_FILE,
    TurnTemplates,
    conversation_turns,
    load_system_prompt,
    load_turn_templates,
)
from narrative_eval.studies.incremental.vocabulary import (
    ALIASES,
    ID_COLUMN,
    CHECKLIST,
    CHECKLIST_RUBRIC,
    HEADLINES,
    NAME,
    QUALITY_RUBRIC,
    SCORE_DIMENSIONS,
    SCORERS,
)
from narrative_eval.studies.viewers import ConversationView
from narrative_eval.study import AfterSweepRequests, CellResult, RequestCount, ReportCommand, SweepSettings, study

REPORT = "creative-integrity"
"""The study's main report subcommand (its other names: the study's)."""
HUMAN_REPORT = "human-validation"
"""The subcommand of its human-validation tables."""
WORD_COUNT = re.compile(r"\b(\d{2,5}) words\b")
"""A brief's length request ("Write ... in 700 words")."""


def creative_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep", help=f"{NAME} sweep name, read from MLflow")
    source.add_argument("--scores", help="score records JSONL (format: docs/formats.md)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--data", help="with --sweep: report only the cells run on this task file")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")


def creative_report(args: argparse.Namespace, data_sha256: str | None) -> dict[str, str]:
    if args.scores:
        return creative_report_from_scores(args.scores, args.out, n_boot=args.resamples, seed=args.seed)
    return creative_report_from_sweep(args.sweep, args.out, n_boot=args.resamples, seed=args.seed,
                                      data_sha256=data_sha256)


def human_arguments(parser: argparse.ArgumentParser) -> None:
    records = parser.add_mutually_exclusive_group()
    records.add_argument("--scores", help="score records JSONL: the responses the pointwise ratings name (record_id)")
    records.add_argument("--sweep", help=f"{NAME} sweep whose score records the ratings name; the tables "
                                         "are attached to its parent run")
    parser.add_argument("--data", help="with --sweep: only the cells run on this task file")
    parser.add_argument("--pointwise", help="pointwise human ratings JSONL (record_id, rater, five 1-5 dimensions)")
    parser.add_argument("--pairwise", help="pairwise verdicts JSONL (case_id, rater, order, two five-level verdicts)")
    parser.add_argument("--cases", help="with --pairwise: pairwise cases JSONL (case_id, record_a, record_b)")
    parser.add_argument("--reference", dest="reference_rater", metavar="RATER",
                        help="the rater every other is compared with in pairwise_agreement (default: the only non-judge)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--alt-test-epsilon", type=float, default=EPSILON, metavar="EPSILON",
                        help=EPSILON_HELP)


def human_report(args: argparse.Namespace, data_sha256: str | None) -> dict[str, str]:
    options = {"pointwise": args.pointwise, "pairwise": args.pairwise, "cases": args.cases,
               "reference": args.reference_rater, "n_boot": args.resamples, "seed": args.seed,
               "alt_test_epsilon": args.alt_test_epsilon}
    if args.sweep:
        return human_validation_from_sweep(args.sweep, args.out, data_sha256=data_sha256, **options)
    return write_human_validation_report(args.out, scores=args.scores, **options)


@study(NAME, aliases=ALIASES)
class IncrementalDeliveryStudy(MultiTurnStudy):
    """Declared: its tasks as items (the brief and its requirements shown to judges), its system prompt and delivery
    conditions as the solver, the requirement checklist and the quality rubric as every judge's scorers, a score
    record of each judge's two valid verdicts. The library's loop (narrative_eval.multi_turn) runs its cells."""

    config_section = IncrementalConfig
    after_sweep_stage = "pairwise judges"
    scorers = SCORERS
    judge_sees = {"task": "task", "requirements": "requirements", "response": ANSWER}  # never the model, condition or turns
    dimensions = SCORE_DIMENSIONS
    id_column, items_name, judged_artifact = ID_COLUMN, "tasks", "score_records.json"

    def items(self, cell: CellSpec) -> list[Item]:
        return [Item(task.story_id, {"task": task.full_instruction, "requirements": list(task.constraints)}, {},
                     {"genre": task.domain}, record=task) for task in select_tasks(cell)]

    def system_prompt(self, cell: CellSpec) -> str:
        return load_system_prompt(cell.prompt_setting or "default",
                                  cell.extra.get("system_prompts_file", DEFAULT_SYSTEM_PROMPTS_FILE))

    def turns(self, cell: CellSpec, item: Item) -> list[str]:
        """The user turns of the cell's delivery condition (`turns_file`: the recap/snowball templates)."""
        return conversation_turns(item.record, cell.condition, self._templates(cell))

    def scorer_rubric(self, judge: JudgeSpec, scorer: str) -> str:
        """The checklist's rubric is the study's; the quality rubric is the judge's own where it names one."""
        return CHECKLIST_RUBRIC if scorer == CHECKLIST else judge.rubric or QUALITY_RUBRIC

    def judged_record(self, cell: CellSpec, conversation: Conversation, judge_id: str) -> ScoreRecord:
        return score_record(cell, conversation.item.record, conversation.seed, judge_id,
                            conversation.verdicts[judge_id])

    def record_scores(self, record: ScoreRecord) -> dict[str, float | None]:
        return record_scores(record)

    def asked_tokens(self, cell: CellSpec) -> int | None:
        """The longest story its briefs ask for ("... in 700 words"), in tokens."""
        words = [int(count) for task in select_tasks(cell) for count in WORD_COUNT.findall(task.full_instruction)]
        return math.ceil(max(words) * TOKENS_PER_WORD) if words else None

    def cell_params(self, cell: CellSpec) -> dict[str, Any]:
        return {"turn_templates_sha256": self._templates(cell).sha256,
                "constraints_path": cell.extra.get("constraints", "constraints.jsonl next to the tasks file")}

    @staticmethod
    def _templates(cell: CellSpec) -> TurnTemplates:
        return load_turn_templates(cell.extra.get("turns_file", DEFAULT_TURNS_FILE))

    def registered_names(self, config: SweepSettings) -> list[tuple[Registry, str]]:
        """The pairwise rubrics (its conditions are checked as the grid its config section declares)."""
        return pairwise_names(config.section)

    def check_config(self, config: SweepSettings) -> list[str]:
        return super().check_config(config) + pairwise_problems(config)

    def registries(self) -> list[Registry]:
        """Its delivery conditions (plugins add theirs with `studies.incremental.turns.condition`)."""
        return [CONDITIONS]

    def headline_metrics(self, judges: Sequence[str]) -> list[str]:
        """Each judge's Creative Integrity and adherence."""
        return [judge_key(judge, name) for judge in judges for name in HEADLINES]

    def headline_labels(self, names: Sequence[str]) -> dict[str, str]:
        return labels(names)

    def used_templates(self, cell: CellSpec, result: CellResult) -> dict[str, Any]:
        """The system prompt (when it is a registered one), then the rubrics."""
        templates: dict[str, Any] = {}
        if cell.prompt_setting in PROMPT_SETTINGS and isinstance(PROMPT_SETTINGS.get(cell.prompt_setting), str):
            templates[f"{cell.study}.{cell.prompt_setting}"] = PROMPT_SETTINGS.get(cell.prompt_setting)
        return {**templates, **super().used_templates(cell, result)}

    def control_items(self, config: SweepSettings, cells: Sequence[CellSpec], judge: JudgeSpec, k: int) -> list[ControlSet]:
        """On K tasks' FULL final replies: the checklist against a refusal and another task's story, the quality
        rubric against the shuffled story, and each pairwise rubric on identical and refusal pairs."""
        return sweep_controls(config.section, cells, judge, k)

    def control_requests(self, config: SweepSettings, cells: Sequence[CellSpec], k: int) -> AfterSweepRequests:
        """Counted from the number of tasks: the stories do not exist before the cells run."""
        return control_requests(config.section, cells, config.judges, k)

    def after_sweep_requests(self, config: SweepSettings, cells: Sequence[CellSpec]) -> AfterSweepRequests:
        """The pairwise judges: every pair of the grid, up to `pairwise_sample`, judged in both orders by every panel
        judge under every pairwise rubric, once per repeat of the judge (judgments an earlier run made are reused, so an upper bound)."""
        section: IncrementalConfig = config.section
        if not section.pairwise_judges:
            return []
        pairs = count_pairs(cells)
        if section.pairwise_sample is not None:
            pairs = min(pairs, section.pairwise_sample)
        return [RequestCount(judge.model, 2 * pairs * judge.repeats, entry.max_new_tokens or judge.max_new_tokens)
                for judge in config.judges for entry in section.pairwise_judges]

    def after_sweep(self, config: SweepSettings, out_dir: Path, data_sha256: str,
                    backend_for: Callable[[ModelSpec], Any]) -> dict[str, str]:
        """The pairwise judges of `pairwise_judges` on the sweep's FULL/SHARDED pairs (studies.incremental.pairwise),
        their tables noted where a judge failed a control check."""
        tables = run_pairwise_judges(config, out_dir, backend_for, data_sha256=data_sha256)
        return with_sweep_checks(tables, config.sweep, out_dir, data_sha256, index=False)

    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        """Export the sweep's score records and write the creative-integrity report from MLflow."""
        return creative_report_from_sweep(sweep, out_dir, data_sha256=data_sha256)

    def report_commands(self) -> list[ReportCommand]:
        return [
            ReportCommand(REPORT, "tables and figures of a FULL/SHARDED study", creative_arguments, creative_report,
                          aliases=(NAME, *(alias for alias in ALIASES if alias != REPORT)),
                          files=(("scores", "score file"), ("data", "data file"))),
            ReportCommand(HUMAN_REPORT, "human validation of a FULL/SHARDED study: pointwise ratings and pairwise "
                                        "verdicts (formats: docs/formats.md)", human_arguments, human_report,
                          files=(("scores", "score file"), ("data", "data file"), ("pointwise", "pointwise file"),
                                 ("pairwise", "pairwise file"), ("cases", "cases file"))),
        ]

    def anchored_outputs(self, sweep: str, data_sha256: str | None = None,
                         ratings: str | Path | None = None) -> list[AnchoredOutputs]:
        """Its responses per judge, with the pointwise ratings file `ratings` (the human-validation format)."""
        return anchored_sweep_responses(sweep, data_sha256, ratings)

    def viewers(self) -> list[ConversationView]:
        """Its Conversations tab: each conversation's turns, and the final stories side by side with their checklists."""
        return [CONVERSATIONS]
