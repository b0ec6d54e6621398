"""The one evaluation loop, owned by the library, and the declaration a single-turn study makes of itself.

A single-turn study (`SingleTurnStudy`) says only what is its own: its *items* (`Item`: an id, the fields its
prompts and judges may see, its references, the columns its rows carry), its *solver* (a prompt file whose user
template is filled from an item's fields; `messages` for another rendering), its *answer* step (`answer`: what
is scored in a reply, with an extraction status where it has one) and its *scorers* (the cell's registered
metrics against the reference named `reference`; judges under `rubric` that see the inputs `judge_sees` names,
so the blinding is declared, not coded). `run_single_turn` does the rest: batches of the backend's batch size,
one engine seed per item and cell seed, the request cache (the backends `Runtime.backend_for` gives), progress
named by stage (`generate`, `score`, `judge <id>`), per-seed summaries aggregated with their intervals, the
generations table, traces and the dataset input, and the judges' control items.

A multi-turn study is declared the same way (`multi_turn.MultiTurnStudy`: a solver of several user turns), and its
loop there runs through the helpers here (`aggregate_seeds`, `shown_to_judge`) and `backends.in_batches`; every
judge of either kind is asked through the one judging step (`judges.resumable.judge_items`).
"""

from __future__ import annotations

import json
import statistics
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from narrative_eval.backends import in_batches
from narrative_eval.data.rows import spread_limit
from narrative_eval.judges import load_rubric, qavg, summarize
from narrative_eval.judges.checks import ControlItem, ControlSet, controls_for, pick_other, refusal_text, sample_ids
from narrative_eval.judges.jury import jury_verdict
from narrative_eval.judges.resumable import JudgedItem, judge_items
from narrative_eval.lazy import lazy_module
from narrative_eval.metrics import METRICS, at_avg, get_metric, has_at_avg, load_metrics, metric_names
from narrative_eval.prompts.render import PromptSettings, fill, load_prompt_file
from narrative_eval.records import CellSpec, JudgeResult, JudgeSpec, Message, Reply, derived_seed, finite_number
from narrative_eval.records.keys import judge_key, judge_prefix, sd_key, seed_key, seeded
from narrative_eval.stats.cell_scores import cell_intervals
from narrative_eval.stats.judge_reliability import REPEAT_MEANS, repeat_agreement, repeat_means
from narrative_eval.study import CellResult, Choices, Grid, Runtime, Study, SweepSettings
from narrative_eval.tracing import AssessmentRecord, CellRecords, TraceRecord, generation_attributes

pd = lazy_module("pandas")

TABLE = "generations.json"
"""A single-turn cell's table: one row per item and seed."""
AT_AVG = "at_avg"
"""The mean of the automatic metrics flagged for it (AtAvg)."""
JUDGE_HEADLINES: tuple[str, ...] = ("qavg", "high_pct")
"""Per-judge numbers shown first, as `judge/<id>/<headline>`: QAvg and High%."""
GENERATE, SCORE = "generate", "score"
"""Stages of a single-turn cell as its progress names them (a judge's is `judge_stage(id)`)."""
ANSWER = "answer"
"""What `judge_sees` maps a rubric input to for the cell's answer (a string names an item field, a function derives
the input from the item and the answer)."""
JUDGE_BOOKKEEPING = ("status", "raw", "error")
"""Per-judge row fields that are not scores."""


# --------------------------------------------------------------------------- the helpers every study runs through


def mean_or_nan(values: Iterable[float]) -> float:
    """The mean, or NaN for no values."""
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def seed_metrics(summaries: Mapping[int, Mapping[str, float]]) -> dict[str, float]:
    """Per-seed values as 'seed<k>/<key>', plus their mean '<key>' and SD '<key>_sd' across seeds (NaNs left out).
    The SD needs two values: a number with one is logged without it (an SD of 0.0 would claim seeds that agree)."""
    metrics: dict[str, float] = {}
    for key in sorted({k for s in summaries.values() for k in s}):
        for seed, summary in summaries.items():
            if key in summary:
                metrics[seed_key(seed, key)] = summary[key]
        values = [s[key] for s in summaries.values() if key in s and s[key] == s[key]]
        if values:
            metrics[key] = statistics.fmean(values)
            if len(values) > 1:
                metrics[sd_key(key)] = statistics.stdev(values)
    return metrics


def aggregate_seeds(summaries: Mapping[int, Mapping[str, float]], rows: Sequence[Mapping[str, Any]] = (),
                    clusters: Sequence[str] | None = None) -> dict[str, float]:
    """What a cell logs of its seeds: `seed_metrics` of their summaries and, where `clusters` gives each of the
    cell's `rows` (one per item and seed, scored under the summaries' keys) its cluster, every number's interval
    as `<key>_lo`, `<key>_hi` from a bootstrap drawing clusters (stats.cell_scores.cell_intervals)."""
    metrics = seed_metrics(summaries)
    if clusters is not None:
        metrics.update(cell_intervals(list(rows), wanted=set(metrics), clusters=clusters))
    return metrics


def judge_metrics(judge_id: str, results: Sequence[JudgeResult]) -> dict[str, float]:
    """One judge's summary (judges.summarize) under 'judge/<id>/...', NaN failure rate when nothing was judged; a
    judge that judged every output several times adds its agreement with itself across the repeats."""
    summary = summarize(results) if results else {"failure_rate": float("nan")}
    if results:
        summary.update(repeat_agreement(results, load_rubric(results[0].rubric)))
    return {judge_key(judge_id, key): value for key, value in summary.items()}


def judge_stage(judge_id: str) -> str:
    return f"judge {judge_id}"


JudgeSource = str | Callable[["Item", "Answer"], Any]
"""What one rubric input shows: `ANSWER` (the answer's text), an item field's name, or a declared function of the item
and the answer (the passage in the model's order...)."""


def shown_to_judge(judge_sees: Mapping[str, JudgeSource], item: Item, answer: Answer | str) -> dict[str, Any]:
    """A rubric's inputs for `answer` to `item`: what `judge_sees` declares (input -> `ANSWER`, an item field, or a
    function of the item and the answer), nothing else."""
    answer = answer if isinstance(answer, Answer) else Answer(answer)
    return {name: source(item, answer) if callable(source) else answer.text if source == ANSWER else item.fields[source]
            for name, source in judge_sees.items()}


def answer_inputs(judge_sees: Mapping[str, JudgeSource]) -> list[str]:
    """The rubric inputs that show the answer (`ANSWER` or derived from it): what a control replaces."""
    return [name for name, source in judge_sees.items() if callable(source) or source == ANSWER]


# --------------------------------------------------------------------------- what a single-turn study declares


def prompt_file_grid(path: Path) -> Grid:
    """A study's grid whose prompt settings are those of its prompt file (the first by default), with no conditions:
    what a single-turn study's config section declares as its `grid`."""
    names = load_prompt_file(path).names()
    return Grid(prompt_settings=Choices("prompt setting", (names[0],), lambda config: names,
                                        f"the settings of its prompt file: {', '.join(names)}"))


@dataclass(frozen=True)
class Item:
    """One item of a single-turn study."""

    id: str
    """Unique in the data (its rows' id column, its traces' key, part of its engine seed)."""
    fields: Mapping[str, Any]
    """What its prompts and judges may see, by slot name."""
    references: Mapping[str, str]
    """Reference name -> text: what its answers are scored against (the dataset's expectations)."""
    columns: Mapping[str, Any] | None = None
    """What its rows, traces and dataset input carry about it beside its id (default: `fields`)."""
    record: Any = None
    """Data kept from the model (never shown unless a prompt or judge input names it): the study's own record of the
    item, which its `messages`, `answer` and `judge_sees` functions read (a shuffle's order, a source row)."""

    @property
    def shown(self) -> Mapping[str, Any]:
        return self.fields if self.columns is None else self.columns


@dataclass(frozen=True)
class Answer:
    """What a reply gives to be scored."""

    text: str | None
    """The answer ('' is scored and not judged; None: nothing to score)."""
    status: str | None = None
    """How it was found, for a study with an extraction step (its rows' `extraction_status`); None: no step."""
    value: Any = None
    """A structured value parsed from the reply beside its text (an order, a label), JSON-serialisable: logged in its
    row as `<answer column>_value` and in its trace's outputs; None: none."""


@dataclass
class Sample:
    """One item answered under one cell seed, with its scores."""

    item: Item
    seed: int
    messages: list[Message]
    reply: Reply
    answer: Answer
    metrics: dict[str, float] = field(default_factory=dict)
    """Metric name -> score against the reference (none when there is no answer)."""
    judges: dict[str, JudgeResult] = field(default_factory=dict)
    """Judge id -> verdict."""


class SingleTurnStudy(Study):
    """A study whose items each get one prompt and give one answer, declared; the library runs its cells."""

    prompts: ClassVar[Path | None] = None
    """Its prompt file (the platform's format: `system`, named `settings` with a `user` template whose slots are an
    item's fields); a study that renders its own messages overrides `prompt_file` and `messages`."""
    rubric: ClassVar[str]
    """The judges' rubric unless a judge names its own."""
    judge_sees: ClassVar[Mapping[str, JudgeSource]]
    """Rubric input -> what it shows: `ANSWER` (the answer), an item field's name, or a function (item, answer) -> value
    of what the study keeps: everything a judge sees."""
    stratum: ClassVar[str | None] = None
    """The item column (of `Item.shown`) that `--limit` spreads over, round-robin, so a small run spans every value;
    None: the first items."""
    reference: ClassVar[str]
    """The reference the metrics score answers against."""
    id_column: ClassVar[str] = "item_id"
    """The rows' id column."""
    answer_column: ClassVar[str] = ANSWER
    """The rows' answer column."""
    items_name: ClassVar[str] = "items"
    """What its items are called (the `n_<items>` metric and param)."""
    answers_name: ClassVar[str | None] = None
    """What its answers are called in the app, plural ('fills'); None: its answer column's label, plural."""
    trace_name: ClassVar[str] = GENERATE
    """Its traces' root span name."""

    @abstractmethod
    def items(self, cell: CellSpec) -> list[Item]:
        """The items of a cell's data, in order (the library applies `--limit`: see `cell_items`)."""

    def cell_items(self, cell: CellSpec) -> list[Item]:
        """The items a cell runs: `items`, then the limit spread over `stratum`."""
        items = self.items(cell)
        if cell.limit is None:
            return items
        return spread_limit(items, cell.limit, *([lambda item: item.shown[self.stratum]] if self.stratum else []))

    def prompt_file(self, cell: CellSpec | None) -> PromptSettings:
        """The prompt file of a cell (logged as `prompt_file_sha256`, its setting registered as a prompt version)."""
        if self.prompts is None:
            raise NotImplementedError(f"{self.name}: declares no prompt file")
        return load_prompt_file(self.prompts)

    def messages(self, cell: CellSpec, item: Item) -> list[Message]:
        """What is sent for one item: the prompt file's system text and its setting's user template filled from
        the item's fields."""
        prompts = self.prompt_file(cell)
        user = fill(prompts.settings[cell.prompt_setting]["user"], dict(item.fields))
        return [Message(role="system", content=prompts.system), Message(role="user", content=user)]

    def answer(self, cell: CellSpec, item: Item, reply: str) -> Answer:
        """What is scored in a reply (default: the reply, stripped)."""
        return Answer(reply.strip())

    def answer_rates(self, samples: Sequence[Sample]) -> dict[str, float]:
        """Per-seed rates of its answer step beside the generic numbers (none by default)."""
        return {}

    def interval_cluster(self, item: Item) -> str | None:
        """What an item is drawn with when its cell's intervals are bootstrapped (items of one cluster together). By
        default each item alone, as items that share nothing are; a study whose items share a source (several blanks of
        one passage) draws them together; None: the cell logs no intervals."""
        return item.id

    # ---------------------------------------------------------------- the Study contract, from the declaration

    def check_config(self, config: SweepSettings) -> list[str]:
        """Prompt settings from its own prompt file (where it declares one and its config section no grid of them)."""
        if self.prompts is None or self.config_section.grid.prompt_settings.names is not None:
            return []
        known = self.prompt_file(None).names()
        return [f"prompt_settings: {name!r} is not a {self.name} setting (its settings: {', '.join(known)})"
                for name in config.prompt_settings if name not in known]

    def count_requests(self, cell: CellSpec) -> int:
        return len(self.cell_items(cell))

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        return run_single_turn(self, cell, runtime)

    def progress_stages(self, cell: CellSpec) -> list[str]:
        return [GENERATE, SCORE, *(judge_stage(judge.id) for judge in cell.judges)]

    def headline_metrics(self, judges: Sequence[str]) -> list[str]:
        """AtAvg, every registered metric (a cell shows those it computed: its study's, or those its config named), then
        each judge's QAvg and High%."""
        return [AT_AVG, *METRICS.names(), *(judge_key(j, h) for j in judges for h in JUDGE_HEADLINES)]

    def judge_rubric(self, judge: JudgeSpec) -> str:
        return judge.rubric or self.rubric

    def own_rubrics(self) -> tuple[str, ...]:
        """Its judges' rubric first (wherever its file lives), then its package's."""
        return tuple(dict.fromkeys([self.rubric, *super().own_rubrics()]))

    def cell_records(self, cell: CellSpec, result: CellResult) -> CellRecords:
        return single_turn_records(self, cell, result)

    def used_templates(self, cell: CellSpec, result: CellResult) -> dict[str, Any]:
        """The prompt setting (system and user template), then the rubrics."""
        prompts = self.prompt_file(cell)
        user = prompts.settings[cell.prompt_setting]["user"]
        return {f"{self.name}.{cell.prompt_setting}": [{"role": "system", "content": prompts.system},
                                                       {"role": "user", "content": user}],
                **super().used_templates(cell, result)}

    def control_items(self, config: SweepSettings, cells: Sequence[CellSpec], judge: JudgeSpec,
                      k: int) -> list[ControlSet]:
        """For K items of the sweep, the controls that fit what the judge sees, each against the item's reference
        shown as the answer: those of the rubric's kind (`judges.checks.controls_for`: a refusal, the answer's
        sentences shuffled, the answer padded with neutral filler...), and where the judge also sees the item (an input that is an item field) another
        item's reference (mismatched_reference) and a blank answer (blank_answer). A study adds its own by
        extending this list with `ControlItem`s in a `ControlSet`."""
        items = {item.id: item for item in self.cell_items(cells[0])} if cells else {}
        rubric = self.judge_rubric(judge)
        answers = answer_inputs(self.judge_sees)
        sees_item = len(answers) < len(self.judge_sees)
        refusal = refusal_text()
        controls = []
        for item_id in sample_ids(items, k):
            gold = self.judge_inputs(items[item_id], self.reference_answer(items[item_id]))
            if sees_item:
                controls += self.reference_swaps(items, item_id, rubric, gold)
            controls += controls_for(rubric, item_id, gold, answers, refusal)
        return [ControlSet(judge, tuple(controls))] if controls else []

    def reference_answer(self, item: Item) -> Answer:
        """The known-good answer to an item that its controls are judged against: its reference as the answer."""
        return Answer(item.references[self.reference])

    def reference_swaps(self, items: Mapping[str, Item], item_id: str, rubric: str,
                        gold: Mapping[str, Any]) -> list[ControlItem]:
        """Another item's reference and a blank in place of the answer, both below the item's own reference: controls
        for a judge that sees the item, so that another item's good answer is a wrong one here."""
        reference = items[item_id].references[self.reference]
        other = pick_other(item_id, [i for i, it in items.items() if it.references[self.reference] != reference])
        swaps = []
        if other is not None:
            wrong = self.judge_inputs(items[item_id], items[other].references[self.reference])
            swaps.append(ControlItem(rubric, "mismatched_reference", item_id, wrong, "below_reference", gold))
        swaps.append(ControlItem(rubric, "blank_answer", item_id, self.judge_inputs(items[item_id], ""),
                                 "below_reference", gold))
        return swaps

    def judge_inputs(self, item: Item, answer: Answer | str) -> dict[str, Any]:
        """A judge's inputs for `answer` to `item`."""
        return shown_to_judge(self.judge_sees, item, answer)


# --------------------------------------------------------------------------- the loop


def run_single_turn(study: SingleTurnStudy, cell: CellSpec, runtime: Runtime) -> CellResult:
    """One cell of a single-turn study: every item under every seed generated, answered, scored, judged; what its
    MLflow run logs."""
    items = study.cell_items(cell)
    metric_params = load_metrics(cell.metrics)  # weights that did not load whole stop the cell before it generates
    samples = _generate(study, cell, runtime, items)
    _score(study, cell, runtime, samples)
    _judge(study, cell, runtime, items, samples)
    per_seed = {seed: [s for s in samples if s.seed == seed] for seed in cell.seeds}
    rubrics = {judge.id: load_rubric(study.judge_rubric(judge)) for judge in cell.judges}
    rubrics.update({jury.id: rubrics[jury.judges[0]] for jury in cell.juries})
    rows = [_row(study, sample, rubrics) for sample in samples]
    clusters = [study.interval_cluster(sample.item) for sample in samples]
    metrics = aggregate_seeds({seed: _seed_summary(study, cell, found) for seed, found in per_seed.items()}, rows,
                              None if None in clusters else clusters)
    metrics[f"n_{study.items_name}"] = float(len(items))
    metrics["n_seeds"] = float(len(per_seed))
    params: dict[str, Any] = {"prompt_file_sha256": study.prompt_file(cell).sha256, f"n_{study.items_name}": len(items),
                              **metric_params}
    if rubrics:  # their texts go to MLflow's prompt registry too (Study.used_templates)
        params["rubric"] = ",".join(sorted({rubric.name for rubric in rubrics.values()}))
        params["rubric_sha256"] = ",".join(sorted({rubric.hash for rubric in rubrics.values()}))
    return CellResult(metrics=metrics, params=params, tables={TABLE: rows})


def _generate(study: SingleTurnStudy, cell: CellSpec, runtime: Runtime, items: list[Item]) -> list[Sample]:
    """Every item under every seed, in batches of the backend's batch size (each cached as it returns); returned
    seed by seed."""
    generator = runtime.backend_for(cell.model)
    sent = {item.id: study.messages(cell, item) for item in items}
    # An item's seeds are sent together: an engine that reuses the previous prompt's prefix reads the prompt once.
    requests = [(seed, item) for item in items for seed in cell.seeds]
    samples: dict[tuple[int, str], Sample] = {}
    for batch in in_batches(requests, generator, runtime.progress, f"{cell.run_name}: {GENERATE}"):
        # Each request's engine seed comes from the cell seed and the item, whichever requests share its batch.
        params = [cell.generation.model_copy(update={"seed": derived_seed(seed, item.id)}) for seed, item in batch]
        replies = generator.generate([sent[item.id] for _, item in batch], params)
        for (seed, item), reply in zip(batch, replies, strict=True):
            answer = study.answer(cell, item, reply.text)
            samples[seed, item.id] = Sample(item, seed, sent[item.id], reply, answer)
    return [samples[seed, item.id] for seed in cell.seeds for item in items]


def _score(study: SingleTurnStudy, cell: CellSpec, runtime: Runtime, samples: list[Sample]) -> None:
    """Every metric of the cell on every answer, one metric at a time (each a step of its progress)."""
    scored = [s for s in samples if s.answer.text is not None]
    names = list(metric_names(cell.metrics))
    scores: dict[str, list[float]] = {}
    for name in runtime.progress(names, f"{cell.run_name}: {SCORE}", len(names)):
        if scored:
            references = [s.item.references[study.reference] for s in scored]
            scores[name] = get_metric(name, cell.metrics).score([s.answer.text for s in scored], references)
    for index, sample in enumerate(scored):
        sample.metrics = {name: values[index] for name, values in scores.items()}


def _judge(study: SingleTurnStudy, cell: CellSpec, runtime: Runtime, items: list[Item], samples: list[Sample]) -> None:
    position = {item.id: index for index, item in enumerate(items)}
    # An item's answers are judged together, so an engine reusing the previous prompt's prefix reads it once.
    judged = sorted((s for s in samples if s.answer.text), key=lambda s: position[s.item.id])
    shown = [study.judge_inputs(s.item, s.answer) for s in judged]
    for judge in cell.judges:
        backend = runtime.backend_for(judge.model)
        made = judge_items(lambda: backend, judge, study.judge_rubric(judge),
                           [JudgedItem(str(index), inputs) for index, inputs in enumerate(shown)],
                           progress=runtime.progress, label=f"{cell.run_name}: {judge_stage(judge.id)}")
        for sample, judgment in zip(judged, made, strict=True):
            sample.judges[judge.id] = judgment.result
    for jury in cell.juries:  # its members' verdicts combined: no call of its own
        for sample in judged:
            sample.judges[jury.id] = jury_verdict(jury, sample.judges)


def _seed_summary(study: SingleTurnStudy, cell: CellSpec, samples: list[Sample]) -> dict[str, float]:
    """One seed's numbers: metric means over the answers, AtAvg, the answer step's rates, request failures,
    tokens and seconds, each judge's summary."""
    scored = [s for s in samples if s.answer.text is not None]
    names = metric_names(cell.metrics)
    # A metric whose range holds 0.0 as an ordinary value scores a blank answer NaN (no score): left out of its mean.
    summary = {name: mean_or_nan(s.metrics[name] for s in scored if finite_number(s.metrics.get(name)) is not None)
               for name in names}
    if scored and has_at_avg(names):
        summary[AT_AVG] = at_avg(summary, names)
    summary.update(study.answer_rates(samples))
    total = len(samples) or 1
    summary["request_failure_rate"] = sum(s.reply.error is not None for s in samples) / total
    summary["prompt_tokens"] = float(sum(s.reply.prompt_tokens for s in samples))
    summary["completion_tokens"] = float(sum(s.reply.completion_tokens for s in samples))
    summary["generation_seconds"] = float(sum(s.reply.seconds for s in samples))
    for judge_id in cell.judge_ids:
        summary.update(judge_metrics(judge_id, [s.judges[judge_id] for s in samples if judge_id in s.judges]))
    return summary


def _row(study: SingleTurnStudy, sample: Sample, rubrics: Mapping[str, Any]) -> dict[str, Any]:
    """One generations row: the item's id and columns, the seed, what was sent and came back, its references and
    every score."""
    reply = sample.reply
    row: dict[str, Any] = {study.id_column: sample.item.id, **sample.item.shown, "seed": sample.seed,
                           "messages": [m.model_dump() for m in sample.messages], "raw_reply": reply.text,
                           study.answer_column: sample.answer.text}
    if sample.answer.status is not None:
        row["extraction_status"] = sample.answer.status
    if sample.answer.value is not None:
        row[value_column(study)] = sample.answer.value
    row.update(sample.item.references)
    row.update({"finish_reason": reply.finish_reason, "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens, "seconds": round(reply.seconds, 4), "error": reply.error})
    row.update(sample.metrics)
    for judge_id, result in sample.judges.items():
        row[judge_key(judge_id, "status")] = "ok" if result.ok else "failed"
        for dimension, value in result.scores.items():
            row[judge_key(judge_id, dimension)] = value
        row[judge_key(judge_id, "qavg")] = qavg(result.scores, rubrics[judge_id].keys) if result.ok else None
        if result.repeats:  # each repeat's mean score (None: that repeat failed), for the report's noise table
            row[judge_key(judge_id, REPEAT_MEANS)] = repeat_means(result)
        row[judge_key(judge_id, "raw")] = result.raw_replies[-1] if result.raw_replies else ""
        row[judge_key(judge_id, "error")] = result.error
    return row


# --------------------------------------------------------------------------- its MLflow records


def single_turn_records(study: SingleTurnStudy, cell: CellSpec, result: CellResult) -> CellRecords:
    """One trace per (item, seed) of a finished cell, with its references as expectations and every score as
    feedback; its items (id, columns, references) as the dataset input. Rows are laid out as `_row` writes them:
    the id, the item's columns, then `seed`."""
    rows = result.tables.get(TABLE, [])
    references = _item_references(study, rows)
    traces = []
    for index, row in enumerate(rows):
        columns = _item_columns(study, row)
        outputs = {"raw_reply": row["raw_reply"], study.answer_column: row[study.answer_column]}
        status = {"extraction_status": row["extraction_status"]} if "extraction_status" in row else {}
        if value_column(study) in row:
            outputs[value_column(study)] = row[value_column(study)]
        traces.append(TraceRecord(
            key=seeded(row[study.id_column], row["seed"]), name=study.trace_name, inputs={"messages": row["messages"]},
            outputs={**outputs, **status}, rows=(index,),
            attributes={**generation_attributes(cell, row["seed"]), study.id_column: row[study.id_column],
                        **{c: row.get(c) for c in columns}, "finish_reason": row.get("finish_reason"),
                        "prompt_tokens": row.get("prompt_tokens"), "completion_tokens": row.get("completion_tokens"),
                        "seconds": row.get("seconds"), **status, "error": row.get("error")},
            assessments=(*(AssessmentRecord(name, row[name], "expectation", Path(cell.data_path).name)
                           for name in references),
                         *_metric_scores(row, study.answer_column, list(cell.metrics.names or ())), *_judge_scores(cell, row))))
    dataset_columns = [study.id_column, *(_item_columns(study, rows[0]) if rows else []), *references]
    frame = pd.DataFrame([{c: row.get(c) for c in dataset_columns} for row in rows], columns=dataset_columns)
    return CellRecords(table=TABLE, traces=traces, dataset=frame.drop_duplicates(study.id_column).reset_index(drop=True),
                       expectations=tuple(references))


def value_column(study: SingleTurnStudy) -> str:
    """The rows' column of the answer's structured value (`Answer.value`)."""
    return f"{study.answer_column}_value"


def _item_columns(study: SingleTurnStudy, row: Mapping[str, Any]) -> list[str]:
    keys = list(row)
    return keys[keys.index(study.id_column) + 1 : keys.index("seed")]


def _item_references(study: SingleTurnStudy, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The reference columns: between the answer (with its status and value) and `finish_reason`."""
    if not rows:
        return []
    keys = list(rows[0])
    start = max(keys.index(key) for key in (study.answer_column, "extraction_status", value_column(study))
                if key in keys) + 1
    return keys[start : keys.index("finish_reason")]


def _metric_scores(row: Mapping[str, Any], answer_column: str, names: list[str]) -> list[AssessmentRecord]:
    why = None if row.get(answer_column) is not None else f"no answer extracted ({row.get('extraction_status')})"
    return [AssessmentRecord(name, finite_number(row.get(name)), "code", "narrative_eval",
                             error=why if finite_number(row.get(name)) is None else None)
            for name in [*names, AT_AVG] if name in row]


def _judge_scores(cell: CellSpec, row: Mapping[str, Any]) -> list[AssessmentRecord]:
    scores = []
    sources = {judge.id: f"{judge.id} ({judge.model.id})" for judge in cell.judges}
    sources.update({jury.id: jury.source for jury in cell.juries})
    for judge_id, source in sources.items():
        prefix = judge_prefix(judge_id)
        rationale = _rationale(row.get(prefix + "raw"))
        error = row.get(prefix + "error") or None
        for key, value in row.items():
            dimension = key[len(prefix):] if key.startswith(prefix) else None
            if dimension and dimension not in JUDGE_BOOKKEEPING:
                scores.append(AssessmentRecord(f"{judge_id}/{dimension}", finite_number(value), "llm_judge",
                                               source, rationale=rationale,
                                               error=(error or "judge failed") if finite_number(value) is None else None))
    return scores


def _rationale(raw: Any) -> str | None:
    """The judge's stated reason, when its reply is a JSON object that gives one."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw.strip().startswith("{") else None
    except ValueError:
        return None
    if isinstance(parsed, dict):
        for key in ("rationale", "reasoning", "explanation", "evidence"):
            if isinstance(parsed.get(key), str):
                return parsed[key]
    return None


__all__ = [
    "ANSWER", "AT_AVG", "GENERATE", "JUDGE_HEADLINES", "SCORE", "TABLE", "Answer", "Item", "JudgeSource", "Sample",
    "SingleTurnStudy", "aggregate_seeds", "judge_metrics", "judge_stage",
    "mean_or_nan", "answer_inputs", "prompt_file_grid", "run_single_turn", "seed_metrics", "shown_to_judge", "single_turn_records", "value_column",
]
