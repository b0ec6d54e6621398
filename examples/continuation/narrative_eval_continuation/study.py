"""The continuation study as the sweep sees it: its config section, cells, MLflow records and report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from narrative_eval.metrics import METRICS
from narrative_eval.prompts.render import load_prompt_file
from narrative_eval.records import CellSpec
from narrative_eval.study import CellResult, Runtime, Study, StudyConfig, study
from narrative_eval.tracing import CellRecords

from narrative_eval_continuation.cell import run_cell, select_items
from narrative_eval_continuation.report import write_report
from narrative_eval_continuation.tracing import continuation_records
from narrative_eval_continuation.vocabulary import AT_AVG, NAME, PROMPTS


class ContinuationConfig(StudyConfig):
    """Keys of a continuation sweep config beside the generic ones."""

    opening_sentences: int = Field(3, ge=1)
    """How many sentences of each passage the model is shown; it writes the one after them."""

    def cell_extra(self) -> dict[str, Any]:
        return {"opening_sentences": self.opening_sentences}


@study(NAME)
class ContinuationStudy(Study):
    config_section = ContinuationConfig

    def check_config(self, config: Any) -> list[str]:
        """Prompt settings from the study's own file; no stratified subset (an item is a passage, not a blank)."""
        known = load_prompt_file(PROMPTS).names()
        problems = [f"prompt_settings: {name!r} is not a {NAME} setting (its settings: {', '.join(known)})"
                    for name in config.prompt_settings if name not in known]
        if config.subset is not None:
            problems.append(f"subset: a {NAME} sweep takes no subset; use limit")
        return problems

    def count_requests(self, cell: CellSpec) -> int:
        return len(select_items(cell))

    count_judged = count_requests  # each continuation is judged once

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        return run_cell(cell, runtime)

    def headline_metrics(self, judges: Sequence[str]) -> list[str]:
        """AtAvg, every registered metric, then each judge's QAvg and High% (names its cells log)."""
        return [AT_AVG, *METRICS.names(), *(f"judge/{j}/{h}" for j in judges for h in ("qavg", "high_pct"))]

    def cell_records(self, cell: CellSpec, result: CellResult) -> CellRecords:
        return continuation_records(cell, result)

    def used_templates(self, cell: CellSpec, result: CellResult) -> dict[str, Any]:
        """The prompt setting (system and user template), then the rubrics."""
        prompts = load_prompt_file(PROMPTS)
        template = [{"role": "system", "content": prompts.system},
                    {"role": "user", "content": prompts.settings[cell.prompt_setting]["user"]}]
        return {f"{NAME}.{cell.prompt_setting}": template, **super().used_templates(cell, result)}

    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        return write_report(sweep, out_dir, data_sha256)
