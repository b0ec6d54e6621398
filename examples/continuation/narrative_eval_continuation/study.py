"""Story continuation declared: a passage's opening, its next sentence to write, scored and judged."""

from pathlib import Path

from pydantic import Field

from narrative_eval.data.instances import domain, load_instances, sentences
from narrative_eval.evaluation import ANSWER, Answer, Item, SingleTurnStudy, prompt_file_grid
from narrative_eval.judges import register_rubric
from narrative_eval.metrics.text import split_sentences
from narrative_eval.reports.single_turn import write_single_turn_report
from narrative_eval.study import StudyConfig, study

PROMPTS = Path(__file__).with_name("prompts.yaml")


class ContinuationConfig(StudyConfig):
    grid = prompt_file_grid(PROMPTS)  # its prompt settings are its prompt file's
    opening_sentences: int = Field(3, ge=1)
    """How many sentences of each passage the model is shown; it writes the one after them."""

    def cell_extra(self):
        return {"opening_sentences": self.opening_sentences}


@study("continuation")
class ContinuationStudy(SingleTurnStudy):
    config_section = ContinuationConfig
    prompts = PROMPTS
    rubric = register_rubric(Path(__file__).with_name("continuation_quality.yaml"))
    judge_sees = {"opening": "opening", "candidate": ANSWER}  # never the true sentence, nor the model
    reference, answer_column = "next_sentence", "continuation"

    def items(self, cell):
        """One item per passage of the instances file (which may hold a passage several times)."""
        opening, items = int(cell.extra["opening_sentences"]), {}
        for instance in load_instances(cell.data_path):
            parts, item_id = sentences(instance.source_text), f"{instance.dataset}/{instance.ref_id}/{opening}"
            if len(parts) > opening and item_id not in items:
                fields = {"domain": domain(instance.dataset), "opening": " ".join(parts[:opening])}
                items[item_id] = Item(item_id, fields, {"next_sentence": parts[opening]})
        return list(items.values())

    def answer(self, cell, item, reply):
        """The reply's first sentence: the study asks for one ('' for a blank reply, which scores 0)."""
        return Answer(next(iter(split_sentences(reply.strip())), ""))

    def answer_rates(self, samples):
        return {"answered_rate": sum(bool(s.answer.text) for s in samples) / max(len(samples), 1)}

    def check_config(self, config):  # no stratified subset: an item is a passage, not a blank
        return ["subset: a continuation sweep takes no subset; use limit"] if config.subset else []

    def summarise(self, sweep, out_dir, data_sha256=None):
        return write_single_turn_report(self, sweep, out_dir, data_sha256, answers_file="continuations", titles=(
            "Continuation: headline numbers per model x setting", "Continuations beside the true next sentence"),
            extra=["answered_rate"])
