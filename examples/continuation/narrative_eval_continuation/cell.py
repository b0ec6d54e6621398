"""One continuation cell: the next sentence of each passage written, scored against the true one, and judged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from narrative_eval.data.infilling import domain, load_instances, sentences
from narrative_eval.judges import Rubric, judge_many, load_rubric, qavg
from narrative_eval.metrics import at_avg, at_avg_names, metric_names, score_all
from narrative_eval.metrics.text import split_sentences
from narrative_eval.prompts.render import fill, load_prompt_file
from narrative_eval.records import CellSpec, JudgeResult, Message, Reply, derived_seed
from narrative_eval.studies.base import aggregate_seeds, chunks, judge_metrics, mean_or_nan
from narrative_eval.study import CellResult, Runtime

from narrative_eval_continuation.vocabulary import AT_AVG, PROMPTS, RUBRIC, TABLE


class Item(NamedTuple):
    """One passage of the data file, cut after its opening sentences."""

    item_id: str
    """dataset/ref_id/number of opening sentences."""
    domain: str
    """The passage's narrative domain."""
    opening: str
    """The sentences the model is shown."""
    next_sentence: str
    """The sentence that follows them in the passage (the reference)."""


@dataclass
class Continuation:
    """What a model wrote after one item under one seed, with its scores."""

    item: Item
    """The item."""
    seed: int
    """The cell seed."""
    messages: list[Message]
    """What was sent."""
    reply: Reply
    """What came back."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Metric name -> score against the true next sentence."""
    judges: dict[str, JudgeResult] = field(default_factory=dict)
    """Judge id -> its verdict."""

    @property
    def text(self) -> str:
        """The reply's first sentence: the study asks for one ('' for a blank reply, which scores 0)."""
        return next(iter(split_sentences(self.reply.text.strip())), "")


def select_items(cell: CellSpec) -> list[Item]:
    """One item per passage of the instances file (which may hold a passage several times), up to the limit."""
    opening = int(cell.extra["opening_sentences"])
    items: dict[str, Item] = {}
    for instance in load_instances(cell.data_path):
        parts = sentences(instance.source_text)
        item_id = f"{instance.dataset}/{instance.ref_id}/{opening}"
        if len(parts) > opening and item_id not in items:
            items[item_id] = Item(item_id, domain(instance.dataset), " ".join(parts[:opening]), parts[opening])
    return list(items.values())[: cell.limit]


def run_cell(cell: CellSpec, runtime: Runtime) -> CellResult:
    """Generate every item under every seed, score, judge; what the cell's MLflow run logs."""
    items = select_items(cell)
    done = _generate(cell, runtime, items)
    scores = score_all([c.text for c in done], [c.item.next_sentence for c in done], cell.metrics)
    for index, continuation in enumerate(done):
        continuation.metrics = {name: values[index] for name, values in scores.items()}
    for judge in cell.judges:
        backend = runtime.backend_for(judge.model)
        batches = chunks([c for c in done if c.text], backend.batch_size)
        for batch in runtime.progress(batches, f"{cell.run_name}: judge {judge.id}", len(batches)):
            # Blinding: the judge sees the opening and the candidate, never the true sentence or the model.
            shown = [{"opening": c.item.opening, "candidate": c.text} for c in batch]
            for continuation, verdict in zip(batch, judge_many(backend, judge, judge.rubric or RUBRIC, shown)):
                continuation.judges[judge.id] = verdict
    rubrics = {judge.id: load_rubric(judge.rubric or RUBRIC) for judge in cell.judges}
    metrics = aggregate_seeds({seed: _summary(cell, [c for c in done if c.seed == seed]) for seed in cell.seeds})
    params: dict[str, Any] = {"prompt_file_sha256": load_prompt_file(PROMPTS).sha256, "n_items": len(items)}
    if rubrics:  # their texts go to MLflow's prompt registry too (Study.used_templates)
        params["rubric"] = ",".join(sorted({rubric.name for rubric in rubrics.values()}))
    return CellResult(metrics={**metrics, "n_items": float(len(items))}, params=params,
                      tables={TABLE: [_row(c, rubrics) for c in done]})


def _generate(cell: CellSpec, runtime: Runtime, items: list[Item]) -> list[Continuation]:
    """Every item under every seed, in chunks of the backend's batch size (each chunk cached as it returns)."""
    prompts = load_prompt_file(PROMPTS)
    user = prompts.settings[cell.prompt_setting]["user"]
    generator = runtime.backend_for(cell.model)
    batches = chunks([(seed, item) for seed in cell.seeds for item in items], generator.batch_size)
    done: list[Continuation] = []
    for batch in runtime.progress(batches, f"{cell.run_name}: generate", len(batches)):
        sent = [[Message(role="system", content=prompts.system), Message(role="user", content=fill(user, {
            "opening": item.opening, "domain": item.domain}))] for _, item in batch]
        params = [cell.generation.model_copy(update={"seed": derived_seed(seed, item.item_id)}) for seed, item in batch]
        replies = generator.generate(sent, params)
        done += [Continuation(item, seed, messages, reply) for (seed, item), messages, reply in zip(batch, sent, replies)]
    return done


def _summary(cell: CellSpec, found: list[Continuation]) -> dict[str, float]:
    """One seed's numbers: metric means, AtAvg, answer and failure rates, each judge's summary."""
    summary = {name: mean_or_nan(c.metrics[name] for c in found) for name in metric_names(cell.metrics)}
    if found and set(at_avg_names()) <= set(summary):
        summary[AT_AVG] = at_avg(summary)
    summary["answered_rate"] = sum(bool(c.text) for c in found) / max(len(found), 1)
    summary["request_failure_rate"] = sum(c.reply.error is not None for c in found) / max(len(found), 1)
    for judge in cell.judges:
        summary.update(judge_metrics(judge.id, [c.judges[judge.id] for c in found if judge.id in c.judges]))
    return summary


def _row(c: Continuation, rubrics: dict[str, Rubric]) -> dict[str, Any]:
    """One generations.json row: the item, what was sent and came back, every score."""
    row: dict[str, Any] = {
        "item_id": c.item.item_id, "domain": c.item.domain, "seed": c.seed, "opening": c.item.opening,
        "next_sentence": c.item.next_sentence, "messages": [m.model_dump() for m in c.messages],
        "raw_reply": c.reply.text, "continuation": c.text, "finish_reason": c.reply.finish_reason,
        "completion_tokens": c.reply.completion_tokens, "error": c.reply.error, **c.metrics,
    }
    for judge_id, result in c.judges.items():
        row.update({f"judge/{judge_id}/{key}": value for key, value in result.scores.items()})
        row[f"judge/{judge_id}/qavg"] = qavg(result.scores, rubrics[judge_id].keys) if result.ok else None
        row[f"judge/{judge_id}/error"] = result.error
    return row
