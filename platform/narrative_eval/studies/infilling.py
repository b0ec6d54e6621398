"""The narrative-infilling study: generate fills, extract answers, score with metrics and judges."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from narrative_eval.data.infilling import blank_position, domain, load_instances
from narrative_eval.data.subset import spread_limit, stratified_subset
from narrative_eval.extraction import extract_answer
from narrative_eval.judges import failure_rate, judge_infills, qavg, rubric_hash
from narrative_eval.metrics import AT_AVG_NAMES, at_avg, score_all
from narrative_eval.prompts import load_prompt_file, render_infilling
from narrative_eval.records import CellSpec, InfillingInstance, InfillingSample, stable_hash
from narrative_eval.studies.base import CellResult, Runtime

INFILL_RUBRIC = "infilling_narrative"
BATCH = 8


def select_instances(cell: CellSpec) -> list[InfillingInstance]:
    """The cell's instances: the data file, stratified subset, then the limit (spread over the strata)."""
    instances = load_instances(cell.data_path)
    if cell.subset is not None:
        instances = stratified_subset(instances, fraction=cell.subset.fraction, seed=cell.subset.seed)
    if cell.limit is not None:
        instances = spread_limit(instances, cell.limit)
    return instances


def request_seed(cell_seed: int, instance_id: str) -> int:
    """Per-request engine seed derived from the cell seed and the instance, stable across runs."""
    return int(stable_hash([cell_seed, instance_id], 8), 16) % (2**31 - 1)


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _seed_summary(samples: list[InfillingSample], metric_names: tuple[str, ...], judge_ids: list[str]) -> dict[str, float]:
    """One seed's headline numbers: metric means over extracted answers, extraction and judge rates."""
    summary: dict[str, float] = {}
    scored = [s for s in samples if s.answer is not None]
    for name in metric_names:
        summary[name] = _mean([s.metrics[name] for s in scored if name in s.metrics])
    if scored and set(AT_AVG_NAMES) <= set(metric_names):
        summary["at_avg"] = at_avg({name: summary[name] for name in AT_AVG_NAMES})
    total = len(samples) or 1
    summary["extraction_success_rate"] = sum(s.extraction_status in ("tag", "echo") for s in samples) / total
    for status in ("tag", "echo", "fallback", "none"):
        summary[f"extraction_{status}_rate"] = sum(s.extraction_status == status for s in samples) / total
    summary["request_failure_rate"] = sum(s.error is not None for s in samples) / total
    summary["prompt_tokens"] = float(sum(s.prompt_tokens for s in samples))
    summary["completion_tokens"] = float(sum(s.completion_tokens for s in samples))
    summary["generation_seconds"] = float(sum(s.seconds for s in samples))
    for judge_id in judge_ids:
        results = [s.judges[judge_id] for s in samples if judge_id in s.judges]
        valid = [r for r in results if r.ok]
        prefix = f"judge/{judge_id}"
        for dimension in (valid[0].scores if valid else {}):
            summary[f"{prefix}/{dimension}"] = _mean([r.scores[dimension] for r in valid if r.scores.get(dimension) is not None])
        averages = [qavg(r.scores) for r in valid]
        summary[f"{prefix}/qavg"] = _mean(averages)
        summary[f"{prefix}/high_pct"] = 100 * sum(a > 4 for a in averages) / len(averages) if averages else float("nan")
        summary[f"{prefix}/failure_rate"] = failure_rate(results) if results else float("nan")
    return summary


class InfillingStudy:
    name = "infilling"
    experiment = "infilling"

    def count_requests(self, cell: CellSpec) -> int:
        return len(select_instances(cell))

    def count_judged(self, cell: CellSpec) -> int:
        return len(select_instances(cell))

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        instances = select_instances(cell)
        prompt_file = cell.extra.get("prompt_file")
        prompts = load_prompt_file(prompt_file) if prompt_file else load_prompt_file()
        generator = runtime.backend_for(cell.model)
        conversations = [render_infilling(cell.prompt_setting, inst, prompt_file) for inst in instances]
        judge_ids = [j.id for j in cell.judges]
        per_seed: dict[int, list[InfillingSample]] = {}

        for seed in cell.seeds:
            samples: list[InfillingSample] = []
            batches = list(zip(_chunks(instances, BATCH), _chunks(conversations, BATCH)))
            for batch_instances, batch_conversations in runtime.progress(
                batches, f"{cell.run_name} seed {seed}: generate", len(batches)
            ):
                params = [cell.generation.model_copy(update={"seed": request_seed(seed, i.instance_id)}) for i in batch_instances]
                replies = generator.generate(batch_conversations, params)
                for inst, messages, reply in zip(batch_instances, batch_conversations, replies):
                    found = extract_answer(reply.text, inst.problem, prompts.example_answers)
                    samples.append(
                        InfillingSample(
                            instance_id=inst.instance_id, seed=seed, messages=list(messages), raw_reply=reply.text,
                            answer=found.answer, extraction_status=found.status, gold=inst.gold_answer,
                            finish_reason=reply.finish_reason, prompt_tokens=reply.prompt_tokens,
                            completion_tokens=reply.completion_tokens, seconds=reply.seconds, error=reply.error,
                        )
                    )
            self._score_metrics(cell, samples)
            self._judge(cell, runtime, instances, samples)
            per_seed[seed] = samples

        return self._result(cell, instances, per_seed, judge_ids, prompts.sha256)

    def _score_metrics(self, cell: CellSpec, samples: list[InfillingSample]) -> None:
        scored = [s for s in samples if s.answer is not None]
        if not scored:
            return
        scores = score_all([s.answer for s in scored], [s.gold for s in scored], cell.metrics)
        for index, sample in enumerate(scored):
            sample.metrics = {name: values[index] for name, values in scores.items()}

    def _judge(self, cell: CellSpec, runtime: Runtime, instances: list[InfillingInstance], samples: list[InfillingSample]) -> None:
        by_id = {inst.instance_id: inst for inst in instances}
        scored = [s for s in samples if s.answer is not None]
        for judge in cell.judges:
            backend = runtime.backend_for(judge.model)
            for batch in runtime.progress(_chunks(scored, BATCH), f"{cell.run_name}: judge {judge.id}", (len(scored) + BATCH - 1) // BATCH):
                # Blinding: the judge sees only the passage with its blank and the candidate fill.
                items = [{"problem": by_id[s.instance_id].problem, "candidate": s.answer} for s in batch]
                for sample, result in zip(batch, judge_infills(backend, judge, items)):
                    sample.judges[judge.id] = result

    def _result(
        self,
        cell: CellSpec,
        instances: list[InfillingInstance],
        per_seed: dict[int, list[InfillingSample]],
        judge_ids: list[str],
        prompt_sha256: str,
    ) -> CellResult:
        summaries = {seed: _seed_summary(samples, cell.metrics.names, judge_ids) for seed, samples in per_seed.items()}
        metrics: dict[str, float] = {}
        for key in sorted({k for s in summaries.values() for k in s}):
            values = [s[key] for s in summaries.values() if key in s and s[key] == s[key]]
            for seed, summary in summaries.items():
                if key in summary:
                    metrics[f"seed{seed}/{key}"] = summary[key]
            if values:
                metrics[key] = statistics.fmean(values)
                metrics[f"{key}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
        metrics["n_instances"] = float(len(instances))
        metrics["n_seeds"] = float(len(per_seed))

        by_id = {inst.instance_id: inst for inst in instances}
        rows = []
        for samples in per_seed.values():
            for s in samples:
                inst = by_id[s.instance_id]
                row: dict[str, Any] = {
                    "instance_id": s.instance_id, "dataset": inst.dataset, "domain": domain(inst.dataset),
                    "position": blank_position(inst), "n": inst.n, "seed": s.seed,
                    "messages": [m.model_dump() for m in s.messages], "raw_reply": s.raw_reply, "answer": s.answer,
                    "extraction_status": s.extraction_status, "gold": s.gold, "finish_reason": s.finish_reason,
                    "completion_tokens": s.completion_tokens, "seconds": round(s.seconds, 4), "error": s.error,
                }
                row.update(s.metrics)
                for judge_id, result in s.judges.items():
                    row[f"judge/{judge_id}/status"] = "ok" if result.ok else "failed"
                    for dimension, value in result.scores.items():
                        row[f"judge/{judge_id}/{dimension}"] = value
                    row[f"judge/{judge_id}/qavg"] = qavg(result.scores) if result.ok else None
                    row[f"judge/{judge_id}/raw"] = result.raw_replies[-1] if result.raw_replies else ""
                    row[f"judge/{judge_id}/error"] = result.error
                rows.append(row)

        params: dict[str, Any] = {"prompt_file_sha256": prompt_sha256, "n_instances": len(instances)}
        if cell.judges:
            params["rubric"] = INFILL_RUBRIC
            params["rubric_sha256"] = rubric_hash(INFILL_RUBRIC)
        return CellResult(metrics=metrics, params=params, tables={"generations.json": rows})

    def summarise(self, sweep: str, out_dir: Path, tracking_uri: str | None = None) -> dict[str, str]:
        from narrative_eval.reports.infilling import write_infilling_report

        return write_infilling_report(sweep, out_dir)
