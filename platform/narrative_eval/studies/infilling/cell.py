"""An infilling cell's items (the instances after the subset and the limit), its solver (the prompt setting's
rendering) and answer step (extraction), and one fill as the app's Fill live tab streams it; the library's loop
(narrative_eval.evaluation) runs the cell."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from narrative_eval.backends.cache import CachedBackend
from narrative_eval.data.instances import load_instances
from narrative_eval.records import CellSpec, GenerationParams, InfillingInstance, Message, Reply
from narrative_eval.studies.infilling.extraction import extract_answer
from narrative_eval.studies.infilling.prompts import prompt_file_for, render_infilling
from narrative_eval.studies.infilling.records import InfillingSample
from narrative_eval.studies.infilling.subset import spread_limit, stratified_subset
from narrative_eval.studies.infilling.vocabulary import RUBRIC


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
    return judge_rubric_name or RUBRIC


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
