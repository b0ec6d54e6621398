"""A multi-turn study declared, and the library's loop over its conversations.

A multi-turn study (`MultiTurnStudy`) says only what is its own: its *items* (`evaluation.Item`: an id, the fields
its judges may see, the columns its rows carry), its *solver* (a system prompt and the user turns an item is
delivered in under the cell's condition: one turn, several, with recaps...), and its *scorers* (the rubrics every
judge runs on a conversation's final reply, each seeing the inputs `judge_sees` names (`evaluation.ANSWER`: the reply), and what one judge's valid
verdicts on a reply make: `judged_record`, `record_scores`). `run_multi_turn` does the rest: turn k of every
conversation in one backend call (a sequential engine runs each conversation to its end instead), one engine seed
per conversation, attempt and turn, replies through the request cache, regeneration of truncated conversations,
judging in batches of the judge's batch size, per-seed summaries aggregated with intervals drawn over items, the
conversations table, the attempts log, every verdict and the study's judged records.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from narrative_eval.backends.cache import CachedBackend
from narrative_eval import tracking
from narrative_eval.evaluation import Item, aggregate_seeds, answer_inputs, judge_stage, mean_or_nan, shown_to_judge
from narrative_eval.judges import load_rubric, rubric_hash
from narrative_eval.judges.checks import ControlSet, controls_for, pick_other, refusal_text, sample_ids
from narrative_eval.judges.judge import GeneratingBackend
from narrative_eval.judges.jury import jury_verdict
from narrative_eval.judges.resumable import JudgedItem, judge_items
from narrative_eval.lazy import lazy_module
from narrative_eval.records import CellSpec, GenerationParams, JudgeResult, JudgeSpec, Message, Reply, Turn, derived_seed
from narrative_eval.records.keys import judge_key, seeded
from narrative_eval.reports.multi_turn import write_multi_turn_report
from narrative_eval.stats.judge_reliability import REPEAT_MEANS, repeat_agreement, repeat_means
from narrative_eval.study import (CellResult, ProgressFactory, RequestCount, Runtime, Study, StudyConfig,
                                  SweepSettings, experiment_of, rubric_templates)
from narrative_eval.tracing import AssessmentRecord, CellRecords, TraceRecord, TurnRecord, generation_attributes

pd = lazy_module("pandas")

TABLE = "conversations.json"
"""A multi-turn cell's table: one row per item, seed and turn (the final turn's row carries the judges' scores)."""
ATTEMPTS = "trajectories.json"
"""Every delivery attempt of a cell, kept or regenerated."""
JUDGMENTS = "judgments.json"
"""Every verdict of a cell: one entry per item, seed and judge, with each scorer's verdict."""
CONVERSATION = "conversation"
"""A conversation's trace: its root span's name."""
TURN_ATTRIBUTES = ("prompt_tokens", "completion_tokens", "finish_reason")
"""What a turn's span carries beside the user turn and the reply."""
NO_VALID_JUDGMENT = "no valid judgment for this conversation"
"""Why a judge's dimensions on a conversation's trace have no value."""
DEFAULT_MAX_REGENERATIONS = 1
"""Fresh attempts given to a truncated conversation before it is left unscored."""
TRUNCATION_EXTRA = ("max_regenerations", "score_truncated")
"""The keys of a cell's `extra` that carry the truncation rule (`Truncation`)."""
TOKENS_PER_WORD = 4 / 3
"""English text's tokens per word (about 0.75 words a token for the common BPE vocabularies): a prompt's word count
as the new tokens its reply needs."""


class Truncation(BaseModel):
    """A multi-turn sweep's rule for a conversation a turn of which is cut by the token limit (config key
    `truncation`): regenerate it up to `regenerate` times with fresh seeds, then score its cut reply (flagged) or
    leave it unscored. A cell carries the rule in its `extra` (`max_regenerations`, `score_truncated`) only where it
    differs from the default, so the hashes of sweeps run before the rule was a key stay."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regenerate: int = Field(default=DEFAULT_MAX_REGENERATIONS, ge=0)
    """Fresh attempts a truncated conversation gets."""
    score: bool = False
    """Score a reply cut by the token limit (flagged; the conversation goes on past a cut turn) rather than leave it
    unscored."""

    def cell_extra(self) -> dict[str, Any]:
        """The rule as a cell's `extra` carries it (`TRUNCATION_EXTRA`)."""
        extra: dict[str, Any] = {}
        if self.score:
            extra["score_truncated"] = True
        if self.regenerate != DEFAULT_MAX_REGENERATIONS:
            extra["max_regenerations"] = self.regenerate
        return extra

    @classmethod
    def of_cell(cls, cell: CellSpec) -> Truncation:
        """The rule a cell runs under."""
        return cls(regenerate=int(cell.extra.get("max_regenerations", DEFAULT_MAX_REGENERATIONS)),
                   score=bool(cell.extra.get("score_truncated", False)))


class MultiTurnConfig(StudyConfig):
    """Keys every multi-turn study's config may hold beside the generic ones (a study's own section extends it)."""

    truncation: Truncation = Truncation()
    """What happens to a conversation cut by the token limit: `{regenerate: N, score: true|false}`."""

    def cell_extra(self) -> dict[str, Any]:
        return self.truncation.cell_extra()


@dataclass
class Conversation:
    """One item delivered under one condition and cell seed: its turns, and once judged its verdicts."""

    item: Item
    condition: str
    seed: int
    turns: list[Turn]
    truncated: bool = False
    """A turn hit the length/context limit or failed (never scored silently)."""
    error: str | None = None
    """Request error, if any."""
    attempt: int = 0
    """0 for the first delivery, k for the k-th regeneration."""
    verdicts: dict[str, dict[str, JudgeResult]] = field(default_factory=dict)
    """Judge id -> scorer -> verdict on the final reply."""

    @property
    def final_text(self) -> str:
        return self.turns[-1].text if self.turns else ""

    def logged(self, id_column: str) -> dict[str, Any]:
        """The conversation as its attempts log holds it."""
        return {id_column: self.item.id, "condition": self.condition, "seed": self.seed,
                "turns": [turn.model_dump(mode="json") for turn in self.turns], "truncated": self.truncated,
                "error": self.error}

    @classmethod
    def from_logged(cls, entry: Mapping[str, Any], id_column: str) -> Conversation:
        """A conversation read back from its attempts log (`logged`); its item holds only the id."""
        return cls(Item(str(entry[id_column]), {}, {}), entry["condition"], int(entry["seed"]),
                   [Turn.model_validate(turn) for turn in entry["turns"]], bool(entry.get("truncated")),
                   entry.get("error"), int(entry.get("attempt", 0)))

    def scoreable(self, score_truncated: bool = False) -> bool:
        """Whether its final reply may be judged (`scoreable`)."""
        return scoreable(self.turns, self.truncated, self.error, score_truncated)


def scoreable(turns: Sequence[Turn], truncated: bool, error: str | None, score_truncated: bool = False) -> bool:
    """Whether a conversation's final reply may be judged: complete, or (opted in) cut only by the token limit."""
    if not turns or not turns[-1].final:
        return False
    return not truncated or (score_truncated and error is None)


class MultiTurnStudy(Study):
    """A study whose items are conversations, declared; the library runs its cells."""

    config_section: ClassVar[type[StudyConfig]] = MultiTurnConfig
    scorers: ClassVar[tuple[str, ...]]
    """What every judge scores a final reply by, in order (one rubric each: `scorer_rubric`); a scorer's verdicts
    count their failures as `judge/<id>/<scorer>_failure_rate` and its rubric's digest as `<scorer>_rubric_sha256`."""
    judge_sees: ClassVar[Mapping[str, str]]
    """Rubric input -> the item field it shows (`evaluation.ANSWER`: the final reply): everything a judge sees."""
    dimensions: ClassVar[tuple[str, ...]]
    """The numbers `record_scores` gives, logged per judge as `judge/<id>/<dimension>`."""
    id_column: ClassVar[str] = "item_id"
    """The rows' id column."""
    items_name: ClassVar[str] = "items"
    """What its items are called (the `n_<items>` metric and param)."""
    judged_artifact: ClassVar[str | None] = None
    """The artifact listing every `judged_record` of a cell (None: not logged)."""

    @abstractmethod
    def items(self, cell: CellSpec) -> list[Item]:
        """The items of a cell, in order."""

    @abstractmethod
    def system_prompt(self, cell: CellSpec) -> str:
        """What every conversation of the cell starts with ('' for none)."""

    @abstractmethod
    def turns(self, cell: CellSpec, item: Item) -> list[str]:
        """The user turns an item is delivered in under the cell's condition, in order."""

    @abstractmethod
    def scorer_rubric(self, judge: JudgeSpec, scorer: str) -> str:
        """The rubric `judge` runs as `scorer`."""

    @abstractmethod
    def judged_record(self, cell: CellSpec, conversation: Conversation, judge_id: str) -> Any:
        """What one judge's valid verdicts on a final reply (`conversation.verdicts[judge_id]`) make."""

    @abstractmethod
    def record_scores(self, record: Any) -> Mapping[str, float | None]:
        """A judged record's numbers, under `dimensions`."""

    def asked_tokens(self, cell: CellSpec) -> int | None:
        """The most new tokens its prompts ask one reply of the cell for (a brief's word count times
        `TOKENS_PER_WORD`...); the dry run warns when `max_new_tokens` is below it (None: its prompts say no length)."""
        return None

    def max_regenerations(self, cell: CellSpec) -> int:
        """Fresh attempts a truncated conversation gets before it is left unscored (the config's `truncation`)."""
        return Truncation.of_cell(cell).regenerate

    def scores_truncated(self, cell: CellSpec) -> bool:
        """Whether a reply cut by the token limit is scored (flagged) rather than left unscored; the conversation
        then goes on past a cut turn (the config's `truncation`)."""
        return Truncation.of_cell(cell).score

    def cell_params(self, cell: CellSpec) -> dict[str, Any]:
        """Params of its own a cell's run logs beside the loop's (digests of its turn templates...)."""
        return {}

    # ---------------------------------------------------------------- the Study contract, from the declaration

    def count_requests(self, cell: CellSpec) -> int:
        """One request per user turn of one seed (regenerations not counted)."""
        return sum(len(self.turns(cell, item)) for item in self.items(cell))

    def count_judged(self, cell: CellSpec) -> int:
        """One request per scorer and item of one seed and judge."""
        return len(self.scorers) * len(self.items(cell))

    def used_templates(self, cell: CellSpec, result: CellResult) -> dict[str, Any]:
        """The judges' rubrics, and the rubric every judge ran as each scorer (the checklist's and the quality
        rubric, which the judges' own `rubric` names only when it replaces one)."""
        scored = rubric_templates(self.scorer_rubric(judge, scorer) for judge in cell.judges for scorer in self.scorers)
        return {**super().used_templates(cell, result), **scored}

    def run_cell(self, cell: CellSpec, runtime: Runtime) -> CellResult:
        return run_multi_turn(self, cell, runtime)

    def judge_inputs(self, item: Item, answer: str) -> dict[str, Any]:
        """A judge's inputs for `answer` to `item`."""
        return shown_to_judge(self.judge_sees, item, answer)

    def check_config(self, config: SweepSettings) -> list[str]:
        """The truncation rule is the config's `truncation` key, not `extra`'s cell-level encoding of it."""
        return [f"extra.{key}: say it as the config's truncation rule, truncation: {{regenerate: N, score: true|false}}"
                for key in TRUNCATION_EXTRA if key in config.extra]

    # ---------------------------------------------------------------- control checks, from the declaration

    def control_items(self, config: SweepSettings, cells: Sequence[CellSpec], judge: JudgeSpec,
                      k: int) -> list[ControlSet]:
        """For K items with a judged final reply in the sweep's finished cells (`sweep_replies`), the controls each
        scorer's rubric kind calls for (`judges.checks.controls_for`: a refusal in place of the reply; under a scores
        rubric the reply's sentences shuffled and the reply padded with neutral filler), each against that reply,
        whose own verdict is its cell's (from the request cache). A study adds its own by overriding this."""
        if not cells:
            return []
        items = {item.id: item for item in self.items(cells[0])}
        replies = {item_id: text for item_id, text in self.sweep_replies(cells).items() if item_id in items}
        answers, refusal = answer_inputs(self.judge_sees), refusal_text()
        controls = [control for item_id in sample_ids(replies, k) for scorer in self.scorers
                    for control in controls_for(self.scorer_rubric(judge, scorer), item_id,
                                                self.judge_inputs(items[item_id], replies[item_id]), answers, refusal)]
        return [ControlSet(judge, tuple(controls))] if controls else []

    def control_requests(self, config: SweepSettings, cells: Sequence[CellSpec], k: int) -> list[RequestCount]:
        """Before any reply exists: at most K items per judge, each with the controls its scorers' rubrics call for
        (counted on a stand-in reply of two sentences) and the reply itself."""
        n = min(k, len(self.items(cells[0]))) if cells else 0
        stand_in = {name: "A stand-in reply. Its second sentence." for name in self.judge_sees}
        counts = []
        for judge in config.judges:
            controls = [control for scorer in self.scorers for control in controls_for(
                self.scorer_rubric(judge, scorer), "item", stand_in, answer_inputs(self.judge_sees))]
            counts.append(RequestCount(judge.model, n * ControlSet(judge, tuple(controls)).requests,
                                       judge.max_new_tokens))
        return counts

    def sweep_replies(self, cells: Sequence[CellSpec]) -> dict[str, str]:
        """Item id -> a final reply its controls are built on: one its finished cell judged (kept, scoreable under
        the cell's truncation rule, not blank), of the reference condition's cells where the grid has them; of
        several models and seeds, the one whose pairing with the item hashes lowest (stable as cells join)."""
        reference = self.condition_order()[0] if self.condition_order() else None
        candidates: dict[str, dict[str, str]] = {}
        for cell in [c for c in cells if c.condition == reference] or list(cells):
            found = tracking.find_cell_run(experiment_of(self.name), cell)
            if found is None or found[1] != "FINISHED":
                continue
            for logged in tracking.load_json_artifact(found[0], ATTEMPTS):
                conversation = Conversation.from_logged(logged, self.id_column)
                if logged["kept"] and conversation.scoreable(self.scores_truncated(cell)) \
                        and conversation.final_text.strip():
                    key = seeded(f"{cell.model.id}/{cell.prompt_setting}/{cell.condition}", conversation.seed)
                    candidates.setdefault(conversation.item.id, {})[key] = conversation.final_text
        return {item_id: replies[pick_other(item_id, replies)] for item_id, replies in candidates.items()}

    def condition_order(self) -> Sequence[str]:
        """Its conditions in report order, the reference first: its config grid's default conditions."""
        return self.config_section.grid.conditions.default

    def summarise(self, sweep: str, out_dir: Path, data_sha256: str | None = None) -> dict[str, str]:
        """The default report (reports.multi_turn): headline numbers per cell with seed spread and intervals, the
        paired contrasts between its conditions, the judges' control checks."""
        return write_multi_turn_report(self, sweep, out_dir, data_sha256)

    def plan_warnings(self, cells: Sequence[CellSpec]) -> list[str]:
        """Each cell whose `max_new_tokens` is below what its prompts ask a reply for (`asked_tokens`)."""
        warnings = []
        for cell in cells:
            asked = self.asked_tokens(cell)
            if asked is not None and cell.generation.max_new_tokens < asked:
                warnings.append(f"{cell.run_name}: max_new_tokens {cell.generation.max_new_tokens} is below the "
                                f"{asked} tokens its prompts ask a reply for: expect truncated conversations "
                                f"(truncation: {Truncation.of_cell(cell).model_dump()})")
        return warnings

    def cell_records(self, cell: CellSpec, result: CellResult) -> CellRecords:
        """One trace per conversation, every scorer's verdict on it as assessments (`multi_turn_records`)."""
        return multi_turn_records(self, cell, result)


# --------------------------------------------------------------------------- delivery


def generate_grouped(backend: GeneratingBackend, conversations: Sequence[Sequence[Message]],
                     params: Sequence[GenerationParams]) -> list[Reply]:
    """Replies with per-request params in as few backend calls as the backend allows: the cached backend (and any
    engine with `per_request_params`) takes the whole list in one call, a bare engine one call per distinct params.
    Replies come back in input order."""
    if isinstance(backend, CachedBackend) or getattr(backend, "per_request_params", False):
        return backend.generate(conversations, list(params))
    groups: dict[str, list[int]] = {}
    for index, request in enumerate(params):
        groups.setdefault(request.digest(), []).append(index)
    replies: list[Reply | None] = [None] * len(conversations)
    for members in groups.values():
        for index, reply in zip(members, backend.generate([conversations[i] for i in members], params[members[0]])):
            replies[index] = reply
    return [reply for reply in replies if reply is not None]


def is_truncated(reply: Reply) -> bool:
    """A reply that hit the length/context limit or failed cannot stand as a finished turn."""
    return reply.error is not None or reply.finish_reason in ("length", "error")


def _turn(index: int, user: str, reply: Reply, final: bool) -> Turn:
    """The Turn of one reply (a failed request that claims 'stop' is recorded as 'error')."""
    return Turn(index=index, final=final, user=user, text=reply.text, prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                finish_reason="error" if reply.error and reply.finish_reason == "stop" else reply.finish_reason)


def deliver(backend: GeneratingBackend, items: Sequence[Item], turn_texts: Sequence[Sequence[str]], condition: str,
            system_prompt: str, params: GenerationParams, seed: int, *, attempt: int = 0,
            progress: ProgressFactory | None = None, observe: Callable[[str, int, Reply], None] | None = None,
            continue_after_length: bool = False) -> list[Conversation]:
    """Every item's conversation, its user turns `turn_texts[i]`, after `system_prompt`; one per item, in order.

    Turn k of every conversation still in play goes out in one backend call, except on a sequential engine
    (llama.cpp), which runs each conversation to its end so every turn reuses the cached history before the next
    starts. Each request is seeded from (seed, item id, attempt, turn), so an item's replies do not depend on which
    others run with it; `attempt` > 0 gives a regeneration fresh seeds. `observe(item id, turn, reply)` sees every
    raw reply (for timing the Turn does not carry).

    A reply cut by the token limit flags the conversation truncated and ends it, unless `continue_after_length`:
    then the cut reply stays in the history, the conversation goes on and its last reply is still marked final (the
    flag stays, so the study decides openly to score it). A failed request always ends the conversation."""
    base = [Message(role="system", content=system_prompt)] if system_prompt else []
    histories: list[list[Message]] = [list(base) for _ in items]
    turns: list[list[Turn]] = [[] for _ in items]
    truncated = [False] * len(items)
    stopped = [False] * len(items)
    errors: list[str | None] = [None] * len(items)

    def run_turn(k: int, members: list[int]) -> None:
        batch = [i for i in members if k < len(turn_texts[i]) and not stopped[i]]
        if not batch:
            return
        for i in batch:
            histories[i].append(Message(role="user", content=turn_texts[i][k]))
        requests = [params.model_copy(update={"seed": derived_seed(seed, items[i].id, attempt, k)}) for i in batch]
        replies = generate_grouped(backend, [list(histories[i]) for i in batch], requests)
        for i, reply in zip(batch, replies, strict=True):
            if observe is not None:
                observe(items[i].id, k, reply)
            failed = reply.error is not None or reply.finish_reason == "error"
            ends = failed or (is_truncated(reply) and not continue_after_length)
            turns[i].append(_turn(k, turn_texts[i][k], reply, final=k == len(turn_texts[i]) - 1 and not ends))
            histories[i].append(Message(role="assistant", content=reply.text))
            if is_truncated(reply):
                truncated[i] = True
                stopped[i] = ends
                errors[i] = errors[i] or reply.error

    steps: Iterable[int]
    if getattr(backend, "sequential", False):
        # One conversation at a time, to its end: each turn then reuses the engine's cached history.
        steps = range(len(items))
        if progress is not None:
            steps = progress(steps, f"{condition} conversations", len(items))
        for i in steps:
            for k in range(len(turn_texts[i])):
                run_turn(k, [i])
    else:
        # Turn k of every conversation in one call, so batching engines (vLLM, hosted APIs) work in parallel.
        n_turns = max((len(texts) for texts in turn_texts), default=0)
        steps = range(n_turns)
        if progress is not None:
            steps = progress(steps, f"{condition} turns", n_turns)
        everyone = list(range(len(items)))
        for k in steps:
            run_turn(k, everyone)
    return [Conversation(item, condition, seed, turns[i], truncated[i], errors[i], attempt)
            for i, item in enumerate(items)]


def messages_of(conversation: Conversation, system_prompt: str) -> list[Message]:
    """The whole conversation as chat messages (system, then user/assistant pairs)."""
    messages = [Message(role="system", content=system_prompt)] if system_prompt else []
    for turn in conversation.turns:
        messages += [Message(role="user", content=turn.user), Message(role="assistant", content=turn.text)]
    return messages


# --------------------------------------------------------------------------- the loop


class _Seconds:
    """Sums engine seconds over every reply a delivery sees (cache hits keep their first timing)."""

    def __init__(self) -> None:
        self.total = 0.0

    def __call__(self, item_id: str, turn: int, reply: Reply) -> None:
        self.total += reply.seconds


@dataclass
class _Seed:
    """One seed of a cell: its kept conversations, every attempt, the scored ones and their judged records."""

    final: list[Conversation]
    attempts: list[tuple[Conversation, bool]]
    scored: list[Conversation]
    records: dict[str, list[tuple[Conversation, Any]]]
    """Judge id -> (conversation, record) of every final reply all its scorers judged validly."""
    failures: dict[str, dict[str, int]]
    """Judge id -> 'any' or a scorer -> failed verdicts."""


def run_multi_turn(study: MultiTurnStudy, cell: CellSpec, runtime: Runtime) -> CellResult:
    """One cell of a multi-turn study: every item delivered under every seed (truncated ones regenerated), the final
    replies judged by every scorer of every judge; what its MLflow run logs."""
    items = study.items(cell)
    system_prompt = study.system_prompt(cell)
    turn_texts = {item.id: study.turns(cell, item) for item in items}
    generator = runtime.backend_for(cell.model)
    backends = {id(generator): generator}
    for judge in cell.judges:
        backend = runtime.backend_for(judge.model)
        backends[id(backend)] = backend
    generated_before = {key: backend.generated for key, backend in backends.items()}

    summaries: dict[int, dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    attempts_log: list[dict[str, Any]] = []
    judged: list[Any] = []
    judgments: list[dict[str, Any]] = []
    for seed in cell.seeds:
        seconds = _Seconds()
        final, attempts = _deliver_with_regeneration(study, cell, runtime, generator, items, turn_texts,
                                                     system_prompt, seed, seconds)
        attempts_log += [{"model": cell.model.id, "attempt": c.attempt, "kept": kept, **c.logged(study.id_column)}
                         for c, kept in attempts]
        scored = [c for c in final if scoreable(c.turns, c.truncated, c.error, study.scores_truncated(cell))]
        _judge(study, cell, runtime, scored)
        judgments += [{study.id_column: c.item.id, "seed": seed, "judge": judge_id,
                       **{scorer: verdict.model_dump(mode="json") for scorer, verdict in c.verdicts[judge_id].items()}}
                      for c in scored for judge_id in cell.judge_ids]
        done = _Seed(final, attempts, scored, *_records(study, cell, scored))
        judged += [record for found in done.records.values() for _, record in found]
        summaries[seed] = _seed_summary(study, done, seconds.total)
        rows += _rows(study, done)

    # Each number, per seed a mean over items, gets an interval from the final turns' rows (which carry the same
    # scores), drawing items.
    finals = [row for row in rows if row["final"]]
    metrics = aggregate_seeds(summaries, finals, [row[study.id_column] for row in finals])
    metrics[f"n_{study.items_name}"] = float(len(items))
    metrics["n_seeds"] = float(len(cell.seeds))
    artifacts: dict[str, Any] = {ATTEMPTS: attempts_log, JUDGMENTS: judgments}
    if study.judged_artifact:
        artifacts[study.judged_artifact] = [_dumped(record) for record in judged]
    return CellResult(metrics=metrics, params=_params(study, cell, len(items), system_prompt), tables={TABLE: rows},
                      artifacts=artifacts,
                      generated=sum(b.generated - generated_before[key] for key, b in backends.items()))


def _deliver_with_regeneration(study: MultiTurnStudy, cell: CellSpec, runtime: Runtime, generator: GeneratingBackend,
                               items: list[Item], turn_texts: Mapping[str, list[str]], system_prompt: str, seed: int,
                               observe: _Seconds) -> tuple[list[Conversation], list[tuple[Conversation, bool]]]:
    """Every item delivered; truncated conversations regenerated with fresh seeds. Returns the kept conversations
    (item order) and every attempt with whether it was kept (discarded ones first, in the order they were redone)."""

    def run(subset: list[Item], attempt: int) -> list[Conversation]:
        retry = f" retry {attempt}" if attempt else ""
        return deliver(generator, subset, [turn_texts[item.id] for item in subset], cell.condition, system_prompt,
                       cell.generation, seed, attempt=attempt, observe=observe,
                       continue_after_length=study.scores_truncated(cell),
                       progress=lambda steps, label, total: runtime.progress(
                           steps, f"{cell.run_name} seed {seed}{retry}: {label}", total))

    current = {c.item.id: c for c in run(list(items), 0)}
    attempts: list[tuple[Conversation, bool]] = []
    for attempt in range(1, study.max_regenerations(cell) + 1):
        redo = [item for item in items if current[item.id].truncated]
        if not redo:
            break
        attempts += [(current[item.id], False) for item in redo]
        current.update((c.item.id, c) for c in run(redo, attempt))
    attempts += [(current[item.id], True) for item in items]
    return [current[item.id] for item in items], attempts


def _judge(study: MultiTurnStudy, cell: CellSpec, runtime: Runtime, scored: list[Conversation]) -> None:
    """Every scorer of every judge on every scored final reply, through the one judging step (a final reply's
    scorers side by side, each under its rubric). A judge sees what `judge_sees` declares (never the model, the
    condition or the conversation)."""
    for judge in cell.judges:
        backend = runtime.backend_for(judge.model)
        asked = [(conversation, scorer) for conversation in scored for scorer in study.scorers]
        rubrics = {scorer: study.scorer_rubric(judge, scorer) for scorer in study.scorers}
        items = [JudgedItem(str(index), study.judge_inputs(conversation.item, conversation.final_text), rubrics[scorer])
                 for index, (conversation, scorer) in enumerate(asked)]
        made = judge_items(lambda: backend, judge, rubrics[study.scorers[0]], items, progress=runtime.progress,
                           label=f"{cell.run_name}: {judge_stage(judge.id)}")
        for (conversation, scorer), judgment in zip(asked, made, strict=True):
            conversation.verdicts.setdefault(judge.id, {})[scorer] = judgment.result
    for jury in cell.juries:  # its members' verdicts combined, scorer by scorer: no call of its own
        for conversation in scored:
            conversation.verdicts[jury.id] = {scorer: jury_verdict(jury, {member: conversation.verdicts[member][scorer]
                                                                          for member in jury.judges})
                                              for scorer in study.scorers}


def _records(study: MultiTurnStudy, cell: CellSpec, scored: list[Conversation]
             ) -> tuple[dict[str, list[tuple[Conversation, Any]]], dict[str, dict[str, int]]]:
    """Per judge, the study's record of every final reply all its scorers judged validly, and the failures."""
    records: dict[str, list[tuple[Conversation, Any]]] = {judge_id: [] for judge_id in cell.judge_ids}
    failures = {judge_id: {"any": 0, **dict.fromkeys(study.scorers, 0)} for judge_id in cell.judge_ids}
    for conversation in scored:
        for judge_id in cell.judge_ids:
            verdicts = conversation.verdicts[judge_id]
            for scorer, verdict in verdicts.items():
                failures[judge_id][scorer] += not verdict.ok
            if all(verdict.ok for verdict in verdicts.values()):
                records[judge_id].append((conversation, study.judged_record(cell, conversation, judge_id)))
            else:
                failures[judge_id]["any"] += 1
    return records, failures


def _seed_summary(study: MultiTurnStudy, seed: _Seed, generation_seconds: float) -> dict[str, float]:
    """One seed's numbers: how many conversations were truncated, scored, regenerated; tokens and seconds; each
    judge's dimensions (means over its records) and failure rates."""
    n = len(seed.final) or 1
    n_scored = len(seed.scored)
    all_turns = [turn for conversation, _ in seed.attempts for turn in conversation.turns]
    finals = [c.turns[-1] for c in seed.scored]
    summary = {
        "truncated_rate": sum(c.truncated for c in seed.final) / n,
        "scored_rate": n_scored / n,
        "scored_truncated_rate": sum(c.truncated for c in seed.scored) / n,
        "regenerated_rate": sum(not kept for _, kept in seed.attempts) / n,
        "prompt_tokens": float(sum(turn.prompt_tokens for turn in all_turns)),
        "completion_tokens": float(sum(turn.completion_tokens for turn in all_turns)),
        "generation_seconds": float(generation_seconds),
        "final_completion_tokens": mean_or_nan(turn.completion_tokens for turn in finals),
        "final_prompt_tokens": mean_or_nan(turn.prompt_tokens for turn in finals),
    }
    for judge_id, found in seed.records.items():
        scores = [study.record_scores(record) for _, record in found]
        for dimension in study.dimensions:
            summary[judge_key(judge_id, dimension)] = mean_or_nan(
                value for value in (s.get(dimension) for s in scores) if value is not None)
        for kind, count in seed.failures[judge_id].items():
            name = "failure_rate" if kind == "any" else f"{kind}_failure_rate"
            summary[judge_key(judge_id, name)] = count / n_scored if n_scored else float("nan")
        # A judge that judged each final reply several times: its agreement with itself, scorer by scorer.
        for scorer in study.scorers:
            verdicts = [c.verdicts[judge_id][scorer] for c in seed.scored if scorer in c.verdicts.get(judge_id, {})]
            if verdicts:
                for name, value in repeat_agreement(verdicts, load_rubric(verdicts[0].rubric)).items():
                    summary[judge_key(judge_id, f"{scorer}_{name}")] = value
    return summary


def _rows(study: MultiTurnStudy, seed: _Seed) -> list[dict[str, Any]]:
    """One row per item and turn of the kept conversations; the final row carries each judge's scores."""
    scores = {(c.item.id, judge_id): study.record_scores(record)
              for judge_id, found in seed.records.items() for c, record in found}
    rows = []
    for conversation in seed.final:
        for turn in conversation.turns:
            row: dict[str, Any] = {
                study.id_column: conversation.item.id, **conversation.item.shown, "condition": conversation.condition,
                "seed": conversation.seed, "attempt": conversation.attempt, "turn": turn.index, "final": turn.final,
                "user": turn.user, "reply": turn.text, "prompt_tokens": turn.prompt_tokens,
                "completion_tokens": turn.completion_tokens, "finish_reason": turn.finish_reason,
                "truncated": conversation.truncated}
            if turn.final:
                for judge_id in seed.records:
                    found = scores.get((conversation.item.id, judge_id))
                    row.update({judge_key(judge_id, dimension): found.get(dimension) if found else None
                                for dimension in study.dimensions})
                # A judge that judged the reply several times: each repeat's mean score per scorer, for the noise table.
                for judge_id, verdicts in conversation.verdicts.items():
                    row.update({judge_key(judge_id, f"{scorer}_{REPEAT_MEANS}"): repeat_means(verdict)
                                for scorer, verdict in verdicts.items() if verdict.repeats})
            rows.append(row)
    return rows


def _params(study: MultiTurnStudy, cell: CellSpec, n_items: int, system_prompt: str) -> dict[str, Any]:
    """Run params beyond the cell spec: the system prompt's digest, the regeneration policy, the rubrics each
    scorer ran (names, and digests per scorer), and the study's own."""
    params: dict[str, Any] = {
        "system_prompt_sha256": hashlib.sha256(system_prompt.encode("utf-8")).hexdigest(),
        "max_regenerations": study.max_regenerations(cell),
        "score_truncated": study.scores_truncated(cell),
        f"n_{study.items_name}": n_items,
        **study.cell_params(cell),
    }
    if cell.judges:
        rubrics = {scorer: sorted({study.scorer_rubric(judge, scorer) for judge in cell.judges})
                   for scorer in study.scorers}
        params["rubrics"] = ",".join(name for names in rubrics.values() for name in names)
        params.update({f"{scorer}_rubric_sha256": ",".join(rubric_hash(name) for name in names)
                       for scorer, names in rubrics.items()})
    return params


# --------------------------------------------------------------------------- its MLflow records


def multi_turn_records(study: MultiTurnStudy, cell: CellSpec, result: CellResult) -> CellRecords:
    """One trace per conversation of a finished cell (a span per turn), each judge's verdicts on its final reply as
    assessments (`verdict_assessments`), and its items (id and columns) as the dataset input. Rows are laid out as
    `_rows` writes them: the id, the item's columns, then `condition`."""
    rows = result.tables.get(TABLE, [])
    judged = {(entry[study.id_column], entry["seed"], entry["judge"]): entry
              for entry in result.artifacts.get(JUDGMENTS, [])}
    columns = _item_columns(study, rows[0]) if rows else []
    traces = []
    for (item_id, seed), group in groupby(enumerate(rows), key=lambda pair: (pair[1][study.id_column], pair[1]["seed"])):
        indexed = list(group)
        turns = [row for _, row in indexed]
        final = turns[-1]
        assessments = [assessment for judge, source in verdict_sources(cell) for assessment in verdict_assessments(
            study, judge, judged.get((item_id, seed, judge.id)), source)]
        traces.append(TraceRecord(
            key=seeded(item_id, seed), name=CONVERSATION,
            inputs={study.id_column: item_id, "condition": final["condition"],
                    "user_turns": [turn["user"] for turn in turns]},
            outputs={"final_reply": final["reply"]}, rows=tuple(index for index, _ in indexed),
            attributes={**generation_attributes(cell, seed), study.id_column: item_id,
                        **{column: final.get(column) for column in columns}, "turns": len(turns),
                        "truncated": final.get("truncated"), "attempt": final.get("attempt")},
            turns=tuple(TurnRecord(turn["user"], turn["reply"], {key: turn.get(key) for key in TURN_ATTRIBUTES})
                        for turn in turns),
            assessments=tuple(assessments)))
    dataset_columns = [study.id_column, *columns]
    frame = pd.DataFrame([{column: row.get(column) for column in dataset_columns} for row in rows],
                         columns=dataset_columns)
    return CellRecords(table=TABLE, traces=traces,
                       dataset=frame.drop_duplicates(study.id_column).reset_index(drop=True))


def verdict_sources(cell: CellSpec) -> list[tuple[JudgeSpec, str]]:
    """Whose verdicts a cell's traces carry and the source each names: every judge, then every jury (as its first
    member's spec under the jury's id, for the rubrics its scorers ran)."""
    judges = {judge.id: judge for judge in cell.judges}
    found = [(judge, f"{judge.id} ({judge.model.id})") for judge in cell.judges]
    return found + [(judges[jury.judges[0]].model_copy(update={"id": jury.id}), jury.source) for jury in cell.juries]


def verdict_assessments(study: MultiTurnStudy, judge: JudgeSpec, judgment: Mapping[str, Any] | None,
                        source: str | None = None) -> list[AssessmentRecord]:
    """One judge's verdicts on a final reply (its `judgments.json` entry) as assessments, scorer by scorer: a
    checklist's score of every requirement (`<judge>/<scorer>/<requirement id>`) and their mean, computed
    (`<judge>/adherence`); a scores rubric's dimensions (`<judge>/<dimension>`, integers on its scale). Where the judge
    gave no valid verdict for every scorer (the reply was not scored, or a verdict failed), its scores rubrics'
    dimensions carry the reason instead (a checklist's requirements are known only from a verdict). `source`: who
    gave them, when not the judge itself (a jury)."""
    source = source or f"{judge.id} ({judge.model.id})"
    verdicts = {scorer: JudgeResult.model_validate(judgment[scorer]) for scorer in study.scorers
                if judgment is not None and scorer in judgment}
    if len(verdicts) < len(study.scorers) or not all(verdict.ok for verdict in verdicts.values()):
        return [AssessmentRecord(f"{judge.id}/{dimension}", None, "llm_judge", source, error=NO_VALID_JUDGMENT)
                for scorer in study.scorers if (rubric := load_rubric(study.scorer_rubric(judge, scorer))).kind == "scores"
                for dimension in rubric.keys]
    found: list[AssessmentRecord] = []
    for scorer, verdict in verdicts.items():
        if load_rubric(verdict.rubric).kind == "checklist":
            found += [AssessmentRecord(f"{judge.id}/{scorer}/{item['constraint_id']}", item["score"], "llm_judge", source)
                      for item in verdict.details.get("items", [])]
            found += [AssessmentRecord(f"{judge.id}/{name}", value, "code", "narrative_eval")
                      for name, value in verdict.scores.items()]
        else:
            found += [AssessmentRecord(f"{judge.id}/{dimension}", None if value is None else round(value), "llm_judge",
                                       source, error=None if value is not None else "not scored")
                      for dimension, value in verdict.scores.items()]
    return found


def _item_columns(study: MultiTurnStudy, row: Mapping[str, Any]) -> list[str]:
    keys = list(row)
    return keys[keys.index(study.id_column) + 1 : keys.index("condition")]


def _dumped(record: Any) -> Any:
    return record.model_dump(mode="json") if isinstance(record, BaseModel) else record


__all__ = [
    "ATTEMPTS", "JUDGMENTS", "TABLE", "TOKENS_PER_WORD", "Conversation", "MultiTurnConfig", "MultiTurnStudy",
    "Truncation", "deliver", "generate_grouped",
    "is_truncated", "messages_of", "multi_turn_records", "run_multi_turn", "scoreable", "verdict_assessments",
    "verdict_sources",
]
