"""One infilling cell: its instances, fills generated and extracted, scored by the metrics and judged."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from narrative_eval.backends.cache import CachedBackend
from narrative_eval.data.infilling import blank_position, domain, load_instances
from narrative_eval.data.subset import spread_limit, stratified_subset
from narrative_eval.extraction import extract_answer
from narrative_eval.judges import INFILLING_RUBRIC, judge_infills, load_rubric, qavg
from narrative_eval.metrics import at_avg, at_avg_names, get_metric, metric_names
from narrative_eval.prompts.render import prompt_file_for, render_infilling
from narrative_eval.records import (
    CellSpec,
    GenerationParams,
    InfillingInstance,
    InfillingSample,
    Message,
    Reply,
    derived_seed,
)
from narrative_eval.stats.cell_scores import cell_intervals
from narrative_eval.studies.base import aggregate_seeds, chunks, judge_metrics, mean_or_nan
from narrative_eval.study import CellResult, Runtime
from narrative_eval.studies.infilling.vocabulary import EXTRACTED, STATUSES


GENERATE, SCORE = "generate", "score"
"""Stages of a cell as its progress names them (a judge's is 'judge <id>')."""


def judge_stage(judge_id: str) -> str:
    return f"judge {judge_id}"


def stages(cell: CellSpec) -> list[str]:
    """The stages a cell goes through, in order, as its progress names them."""
    return [GENERATE, SCORE, *(judge_stage(judge.id) for judge in cell.judges)]


def select_instances(cell: CellSpec) -> list[InfillingInstance]:
    """The cell's instances: the data file, stratified subset, then the limit (spread over the strata)."""
    instances = load_instances(cell.data_path)
    if cell.subset is not None:
        instances = stratified_subset(instances, fraction=cell.subset.fraction, seed=cell.subset.seed)
    if cell.limit is not None:
        instances = spread_limit(instances, cell.limit)
    return instances


def judge_rubric(judge_rubric_name: str | None) -> str:
    """The rubric an infilling judge uses: its own, or the study's narrative rubric."""
    return judge_rubric_name or INFILLING_RUBRIC


def make_sample(
    instance: InfillingInstance, seed: int, messages: Sequence[Message], reply: Reply, example_answers: Sequence[str]
) -> InfillingSample:
    """A sample from one reply: the answer extracted (with its status) next to what was sent and the gold."""
    found = extract_answer(reply.text, instance.problem, tuple(example_answers))
    return InfillingSample(
        instance_id=instance.instance_id, seed=seed, messages=list(messages), raw_reply=reply.text, answer=found.answer,
        extraction_status=found.status, gold=instance.gold_answer, finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, seconds=reply.seconds, error=reply.error,
    )


def stream_fill(
    generator: CachedBackend, instance: InfillingInstance, setting: str, params: GenerationParams, prompt_file: str | None = None
) -> Iterator[tuple[str, InfillingSample | None]]:
    """One fill as a cell makes it (same prompt, request cache, extraction), streamed: yields (reply so far, None)
    while the reply grows, then (whole reply, sample) once; a cached reply comes in one piece."""
    prompts = prompt_file_for(setting, prompt_file)
    messages = render_infilling(setting, instance, prompt_file)
    text = ""
    for piece in generator.stream(messages, params):
        text += piece
        yield text, None
    yield text, make_sample(instance, params.seed or 0, messages, Reply(text=text), prompts.example_answers)


def _seed_summary(samples: list[InfillingSample], cell: CellSpec) -> dict[str, float]:
    """One seed's headline numbers: metric means over extracted answers, extraction and judge rates."""
    summary: dict[str, float] = {}
    scored = [s for s in samples if s.answer is not None]
    names = metric_names(cell.metrics)
    for name in names:
        summary[name] = mean_or_nan(s.metrics[name] for s in scored if name in s.metrics)
    if scored and set(at_avg_names()) <= set(names):
        summary["at_avg"] = at_avg(summary)
    total = len(samples) or 1
    summary["extraction_success_rate"] = sum(s.extraction_status in EXTRACTED for s in samples) / total
    for status in STATUSES:
        summary[f"extraction_{status}_rate"] = sum(s.extraction_status == status for s in samples) / total
    summary["request_failure_rate"] = sum(s.error is not None for s in samples) / total
    summary["prompt_tokens"] = float(sum(s.prompt_tokens for s in samples))
    summary["completion_tokens"] = float(sum(s.completion_tokens for s in samples))
    summary["generation_seconds"] = float(sum(s.seconds for s in samples))
    for judge in cell.judges:
        summary.update(judge_metrics(judge.id, [s.judges[judge.id] for s in samples if judge.id in s.judges]))
    return summary


def _row(sample: InfillingSample, instance: InfillingInstance, dimensions: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """One generations.json row: the instance, what was sent, what came back, and every score."""
    row: dict[str, Any] = {
        "instance_id": sample.instance_id, "dataset": instance.dataset, "domain": domain(instance.dataset),
        "position": blank_position(instance), "n": instance.n, "seed": sample.seed,
        "messages": [m.model_dump() for m in sample.messages], "raw_reply": sample.raw_reply, "answer": sample.answer,
        "extraction_status": sample.extraction_status, "gold": sample.gold, "finish_reason": sample.finish_reason,
        "prompt_tokens": sample.prompt_tokens, "completion_tokens": sample.completion_tokens, "seconds": round(sample.seconds, 4), "error": sample.error,
    }
    row.update(sample.metrics)
    for judge_id, result in sample.judges.items():
        row[f"judge/{judge_id}/status"] = "ok" if result.ok else "failed"
        for dimension, value in result.scores.items():
            row[f"judge/{judge_id}/{dimension}"] = value
        row[f"judge/{judge_id}/qavg"] = qavg(result.scores, dimensions[judge_id]) if result.ok else None
        row[f"judge/{judge_id}/raw"] = result.raw_replies[-1] if result.raw_replies else ""
        row[f"judge/{judge_id}/error"] = result.error
    return row


def run_cell(cell: CellSpec, runtime: Runtime) -> CellResult:
    """Run one infilling cell: generate every instance under every seed, score, judge; what its run logs."""
    instances = select_instances(cell)
    prompts = prompt_file_for(cell.prompt_setting, cell.extra.get("prompt_file"))
    samples = _generate(cell, runtime, instances, prompts.example_answers)
    _score_metrics(cell, runtime, samples)
    _judge(cell, runtime, instances, samples)
    per_seed = {seed: [s for s in samples if s.seed == seed] for seed in cell.seeds}
    return _result(cell, instances, per_seed, prompts.sha256)


def _generate(
    cell: CellSpec, runtime: Runtime, instances: list[InfillingInstance], example_answers: tuple[str, ...]
) -> list[InfillingSample]:
    """Every instance under every seed, sent in chunks of the backend's batch size (each chunk cached as it returns);
    returned seed by seed."""
    generator = runtime.backend_for(cell.model)
    conversations = {i.instance_id: render_infilling(cell.prompt_setting, i, cell.extra.get("prompt_file")) for i in instances}
    # An instance's seeds are sent together: an engine that reuses the previous prompt's prefix reads the prompt once.
    requests = [(seed, inst) for inst in instances for seed in cell.seeds]
    batches = chunks(requests, generator.batch_size)
    samples: dict[tuple[int, str], InfillingSample] = {}
    for batch in runtime.progress(batches, f"{cell.run_name}: {GENERATE}", len(batches)):
        params = [cell.generation.model_copy(update={"seed": derived_seed(seed, inst.instance_id)}) for seed, inst in batch]
        replies = generator.generate([conversations[inst.instance_id] for _, inst in batch], params)
        for (seed, inst), reply in zip(batch, replies, strict=True):
            samples[seed, inst.instance_id] = make_sample(inst, seed, conversations[inst.instance_id], reply, example_answers)
    return [samples[seed, inst.instance_id] for seed in cell.seeds for inst in instances]


def _score_metrics(cell: CellSpec, runtime: Runtime, samples: list[InfillingSample]) -> None:
    """Every metric of the cell on every extracted fill, one metric at a time (each one a step of its progress)."""
    scored = [s for s in samples if s.answer is not None]
    names = list(metric_names(cell.metrics))
    scores: dict[str, list[float]] = {}
    for name in runtime.progress(names, f"{cell.run_name}: {SCORE}", len(names)):
        if scored:
            scores[name] = get_metric(name, cell.metrics).score([s.answer for s in scored], [s.gold for s in scored])
    for index, sample in enumerate(scored):
        sample.metrics = {name: values[index] for name, values in scores.items()}


def _judge(cell: CellSpec, runtime: Runtime, instances: list[InfillingInstance], samples: list[InfillingSample]) -> None:
    by_id = {inst.instance_id: inst for inst in instances}
    position = {inst.instance_id: index for index, inst in enumerate(instances)}
    # An instance's fills are judged together, so an engine reusing the previous prompt's prefix reads its passage once.
    scored = sorted((s for s in samples if s.answer is not None), key=lambda s: position[s.instance_id])
    for judge in cell.judges:
        backend = runtime.backend_for(judge.model)
        batches = chunks(scored, backend.batch_size)
        for batch in runtime.progress(batches, f"{cell.run_name}: {judge_stage(judge.id)}", len(batches)):
            # Blinding: the judge sees only the passage with its blank and the candidate fill.
            items = [{"problem": by_id[s.instance_id].problem, "candidate": s.answer} for s in batch]
            for sample, result in zip(batch, judge_infills(backend, judge, items), strict=True):
                sample.judges[judge.id] = result


def _result(
    cell: CellSpec, instances: list[InfillingInstance], per_seed: dict[int, list[InfillingSample]], prompt_sha256: str
) -> CellResult:
    metrics = aggregate_seeds({seed: _seed_summary(samples, cell) for seed, samples in per_seed.items()})
    metrics["n_instances"] = float(len(instances))
    metrics["n_seeds"] = float(len(per_seed))
    by_id = {inst.instance_id: inst for inst in instances}
    rubrics = {judge.id: load_rubric(judge_rubric(judge.rubric)) for judge in cell.judges}
    dimensions = {judge_id: rubric.keys for judge_id, rubric in rubrics.items()}
    rows = [_row(s, by_id[s.instance_id], dimensions) for samples in per_seed.values() for s in samples]
    metrics.update(cell_intervals(rows, wanted=set(metrics)))
    params: dict[str, Any] = {"prompt_file_sha256": prompt_sha256, "n_instances": len(instances)}
    if rubrics:
        params["rubric"] = ",".join(sorted({rubric.name for rubric in rubrics.values()}))
        params["rubric_sha256"] = ",".join(sorted({rubric.hash for rubric in rubrics.values()}))
    return CellResult(metrics=metrics, params=params, tables={"generations.json": rows})
