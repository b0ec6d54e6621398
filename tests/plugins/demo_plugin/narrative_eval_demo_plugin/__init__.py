"""A plugin adding one of each extension kind: metrics (one with a signed range), a rubric, a prompt setting, a
condition, a backend, a cell executor, a study written as a program and one declared (`opening`)."""

from pathlib import Path

from narrative_eval.backends import backend
from narrative_eval.backends.llama_cpp import LlamaCppBackend
from narrative_eval.executors import executor
from narrative_eval.judges import register_rubric
from narrative_eval.metrics import Metric, metric
from narrative_eval.prompts.render import register_prompt_file
from narrative_eval.studies.incremental.turns import condition
from narrative_eval.study import CellResult, Study, study
from narrative_eval_demo_plugin import opening, revision  # noqa: F401 (registers the declared studies `opening`, `revision`)

HERE = Path(__file__).parent


@metric("length_ratio", in_at_avg=True)
class LengthRatio(Metric):
    """Shorter word count over longer word count of candidate and reference."""

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        return [min(len(c.split()), len(r.split())) / max(len(c.split()), len(r.split())) for c, r in zip(candidates, references)]


@metric("length_balance", range=(-1, 1))
class LengthBalance(Metric):
    """(candidate words - reference words) / (candidate words + reference words): from -1 to 1, negative when the
    candidate is shorter (a signed metric, as a correlation is)."""

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        return [(len(c.split()) - len(r.split())) / (len(c.split()) + len(r.split())) for c, r in zip(candidates, references)]


register_rubric(HERE / "three_dims.yaml")
register_prompt_file(HERE / "settings.yaml")


@condition("reverse")
def reverse(task, templates):
    """The shards in reverse order: the last requirement first."""
    return list(reversed(task.shards))


@backend("llama_cpp_plugin")
class PluginLlamaCpp(LlamaCppBackend):
    """The llama.cpp engine registered again from outside the project, under its own name."""


@executor("last_first")
def run_last_first(cells, config, parent_run_id, progress):
    """The local executor over the grid in reverse order (outcomes still in grid order)."""
    from narrative_eval.executors.local import run_local

    return run_local(cells[::-1], config, parent_run_id, progress)[::-1]


@study("line_count", experiment="plugin-line-count", aliases=("lines",))
class LineCount(Study):
    """A study that asks no model: each cell logs how many non-blank lines its data file has."""

    version = 1  # raised when its numbers change: its finished cells become new ones (tests/plugins bumps it)

    def count_requests(self, cell):
        return 0

    def run_cell(self, cell, runtime):
        text = Path(cell.data_path).read_text(encoding="utf-8")
        return CellResult(metrics={"lines": float(sum(1 for line in text.splitlines() if line.strip()))})

    def summarise(self, sweep, out_dir, data_sha256=None):
        return {}
