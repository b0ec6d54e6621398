"""A single-turn study declared in a few lines: shown the rest of a passage, a model writes its first sentence,
scored against the true one and judged on the package's rubric; the library runs it, traces and control checks
included."""

from pathlib import Path

from narrative_eval.data.instances import load_instances, sentences
from narrative_eval.evaluation import ANSWER, Item, SingleTurnStudy
from narrative_eval.judges import register_rubric
from narrative_eval.reports.single_turn import write_single_turn_report
from narrative_eval.study import study

HERE = Path(__file__).parent


@study("opening", experiment="plugin-opening")
class OpeningStudy(SingleTurnStudy):
    prompts = HERE / "opening_prompts.yaml"
    rubric = register_rubric(HERE / "opening_quality.yaml")
    judge_sees = {"rest": "rest", "candidate": ANSWER}
    reference = "first_sentence"

    def items(self, cell):
        """One item per passage with at least two sentences, up to the limit."""
        items = {}
        for instance in load_instances(cell.data_path):
            parts = sentences(instance.source_text)
            if len(parts) > 1:
                fields = {"rest": " ".join(parts[1:])}
                item_id = f"{instance.dataset}/{instance.ref_id}"
                items.setdefault(item_id, Item(item_id, fields, {"first_sentence": parts[0]}))
        return list(items.values())[: cell.limit]

    def summarise(self, sweep, out_dir, data_sha256=None):
        return write_single_turn_report(self, sweep, out_dir, data_sha256, answers_file="openings",
                                        titles=("Opening: headline numbers", "Openings beside the true ones"))
