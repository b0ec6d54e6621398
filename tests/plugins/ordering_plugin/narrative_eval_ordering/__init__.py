"""Sentence ordering declared: a passage's first sentences shuffled and numbered, the model gives their order (parsed
into a list), scored by Kendall's tau against the true order; a judge reads the passage in the model's order."""

import random
import re
from pathlib import Path

from scipy.stats import kendalltau

from narrative_eval.data import load_rows, sentences
from narrative_eval.evaluation import Answer, Item, SingleTurnStudy
from narrative_eval.judges import register_rubric
from narrative_eval.metrics import Metric, metric
from narrative_eval.reports.single_turn import write_single_turn_report
from narrative_eval.study import study

HERE, SHOWN = Path(__file__).parent, 5


@metric("kendall_tau", label="Kendall's tau", range=(-1, 1))
class KendallTau(Metric):
    def _score_nonblank(self, candidates, references):  # each sentence's place in the model's order vs the true one
        return [float(kendalltau([c.split().index(n) for n in r.split()], range(len(r.split()))).statistic)
                for c, r in zip(candidates, references)]


def in_model_order(item, answer):  # what the judge sees: the passage as the model ordered it
    return " ".join(item.record[int(n) - 1] for n in (answer.text or "").split())


@study("ordering", experiment="plugin-ordering")
class OrderingStudy(SingleTurnStudy):
    prompts, rubric = HERE / "prompts.yaml", register_rubric(HERE / "ordering_coherence.yaml")
    judge_sees, reference, metrics, stratum = {"passage": in_model_order}, "order", ("kendall_tau",), "dataset"

    def items(self, cell):
        items = []
        for row in load_rows(cell.data_path, ("dataset", "ref_id", "text")):
            parts = sentences(row["text"])[:SHOWN]
            shown = random.Random(row["ref_id"]).sample(parts, len(parts))  # the shuffle is kept from the model
            numbered = "\n".join(f"{n}. {text}" for n, text in enumerate(shown, 1))
            order = " ".join(str(shown.index(text) + 1) for text in parts)
            items.append(Item(row["ref_id"], {"numbered": numbered}, {"order": order}, {"dataset": row["dataset"]}, shown))
        return items

    def answer(self, cell, item, reply):
        order = list(dict.fromkeys(int(n) for n in re.findall(r"\d+", reply) if 1 <= int(n) <= len(item.record)))
        whole = len(order) == len(item.record)
        return Answer(" ".join(map(str, order)) if whole else None, "ok" if whole else "incomplete", order or None)

    def summarise(self, sweep, out_dir, data_sha256=None):
        return write_single_turn_report(self, sweep, out_dir, data_sha256, answers_file="orders",
                                        titles=("Sentence ordering: headline numbers", "Orders beside the true ones"))
