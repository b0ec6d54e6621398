"""Drive a creative-writing conversation under a delivery condition (see conditions.py), after the system prompt.

Only the last reply of a conversation is judged. Tasks are driven turn by turn: turn k of every
task still in play goes out in one backend call, so batched engines see whole batches. A reply
that stops on the length/context limit or fails ends its conversation there and flags the
trajectory truncated; the caller decides whether to regenerate it (never to score it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from narrative_eval.backends.cache import CachedBackend
from narrative_eval.prompts.render import PROMPT_SETTINGS, SYSTEM_PROMPT
from narrative_eval.records import GenerationParams, Message, Reply, derived_seed
from narrative_eval.studies.incremental.records import Trajectory, Turn, WritingTask
from narrative_eval.studies.incremental.turns import DEFAULT_SYSTEM_PROMPTS_FILE, TurnTemplates, conversation_turns

class GeneratesReplies(Protocol):
    """Anything with the backend call signature (a Backend or a CachedBackend)."""

    def generate(self, conversations: Sequence[Sequence[Message]], params: GenerationParams) -> list[Reply]: ...


def load_system_prompt(name: str = "default", path: str | Path = DEFAULT_SYSTEM_PROMPTS_FILE) -> str:
    """The system prompt called `name`: a registered one (packaged file or plugin) unless another prompts file
    is given; a path to a .txt/.md file is read as the prompt itself."""
    candidate = Path(name)
    if candidate.suffix in (".txt", ".md") and candidate.is_file():
        return candidate.read_text(encoding="utf-8").strip()
    if Path(path) == DEFAULT_SYSTEM_PROMPTS_FILE:
        entry = PROMPT_SETTINGS.entry(name)
        if entry.meta.get("template") != SYSTEM_PROMPT:
            raise KeyError(f"{name!r} is a {entry.meta.get('template')}, not a {SYSTEM_PROMPT}")
        return entry.target
    prompts = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if name not in prompts:
        raise KeyError(f"unknown system prompt {name!r}; known: {', '.join(prompts)} (or give a .txt/.md file)")
    return str(prompts[name] or "")


def is_truncated(reply: Reply) -> bool:
    """A reply that hit the length/context limit or failed cannot stand as a finished turn."""
    return reply.error is not None or reply.finish_reason in ("length", "error")


def generate_grouped(
    backend: GeneratesReplies, conversations: Sequence[Sequence[Message]], params: Sequence[GenerationParams]
) -> list[Reply]:
    """Generate with per-request params in as few backend calls as the backend allows.

    The cached backend (and any engine with per_request_params) takes the whole list in one
    call; a bare engine gets one call per distinct params. Replies come back in input order.
    """
    if isinstance(backend, CachedBackend) or getattr(backend, "per_request_params", False):
        return backend.generate(conversations, list(params))
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(params):
        groups.setdefault(p.digest(), []).append(i)
    replies: list[Reply | None] = [None] * len(conversations)
    for members in groups.values():
        for i, reply in zip(members, backend.generate([conversations[i] for i in members], params[members[0]])):
            replies[i] = reply
    return [r for r in replies if r is not None]


def _turn(index: int, user: str, reply: Reply, final: bool) -> Turn:
    """The Turn record of one reply (a failed request that claims 'stop' is recorded as 'error')."""
    return Turn(
        index=index, final=final, user=user, text=reply.text, prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        finish_reason="error" if reply.error and reply.finish_reason == "stop" else reply.finish_reason,
    )


def deliver(
    backend: GeneratesReplies,
    tasks: Sequence[WritingTask],
    condition: str,
    system_prompt: str,
    params: GenerationParams,
    seed: int,
    *,
    attempt: int = 0,
    templates: TurnTemplates | None = None,
    progress: Callable[[Iterable[Any], str, int | None], Iterable[Any]] | None = None,
    observe: Callable[[str, int, Reply], None] | None = None,
    continue_after_length: bool = False,
) -> list[Trajectory]:
    """Run every task's conversation under `condition` and return one trajectory per task, in task order.

    Turn k of every task still in play goes out in one backend call, except on a sequential engine
    (llama.cpp), which runs each conversation to its end so every turn reuses the cached history
    before the next conversation starts. Each request is seeded
    from (seed, story_id, attempt, turn), so a task's replies do not depend on which other tasks
    run with it; `attempt` > 0 gives a regeneration fresh seeds. `observe(story_id, turn, reply)`
    sees every raw reply (for timing and cache accounting the Turn record does not carry).

    A reply cut by the token limit flags the trajectory truncated and ends it, unless
    `continue_after_length` is set: then the cut reply stays in the history, the conversation
    goes on, and its last reply is still marked final (the flag stays, so the caller can decide
    openly to score it). A failed request always ends the trajectory.
    """
    turn_texts = [conversation_turns(task, condition, templates) for task in tasks]
    base: list[Message] = [Message(role="system", content=system_prompt)] if system_prompt else []
    histories: list[list[Message]] = [list(base) for _ in tasks]
    turns: list[list[Turn]] = [[] for _ in tasks]
    truncated = [False] * len(tasks)
    stopped = [False] * len(tasks)
    errors: list[str | None] = [None] * len(tasks)

    def run_turn(k: int, members: list[int]) -> None:
        batch = [i for i in members if k < len(turn_texts[i]) and not stopped[i]]
        if not batch:
            return
        for i in batch:
            histories[i].append(Message(role="user", content=turn_texts[i][k]))
        request_params = [params.model_copy(update={"seed": derived_seed(seed, tasks[i].story_id, attempt, k)}) for i in batch]
        replies = generate_grouped(backend, [list(histories[i]) for i in batch], request_params)
        for i, reply in zip(batch, replies):
            if observe is not None:
                observe(tasks[i].story_id, k, reply)
            failed = reply.error is not None or reply.finish_reason == "error"
            ends = failed or (is_truncated(reply) and not continue_after_length)
            turns[i].append(_turn(k, turn_texts[i][k], reply, final=k == len(turn_texts[i]) - 1 and not ends))
            histories[i].append(Message(role="assistant", content=reply.text))
            if is_truncated(reply):
                truncated[i] = True
                stopped[i] = ends
                errors[i] = errors[i] or reply.error

    if getattr(backend, "sequential", False):
        # One conversation at a time, to its end: each turn then reuses the engine's cached history.
        steps: Iterable[int] = range(len(tasks))
        if progress is not None:
            steps = progress(steps, f"{condition} conversations", len(tasks))
        for i in steps:
            for k in range(len(turn_texts[i])):
                run_turn(k, [i])
    else:
        # Turn k of every task in one call, so batching engines (vLLM, hosted APIs) work in parallel.
        n_turns = max((len(t) for t in turn_texts), default=0)
        steps = range(n_turns)
        if progress is not None:
            steps = progress(steps, f"{condition} turns", n_turns)
        everyone = list(range(len(tasks)))
        for k in steps:
            run_turn(k, everyone)
    return [
        Trajectory(story_id=task.story_id, condition=condition, seed=seed, turns=turns[i], truncated=truncated[i], error=errors[i])
        for i, task in enumerate(tasks)
    ]


def messages_of(trajectory: Trajectory, system_prompt: str) -> list[Message]:
    """The whole conversation of a trajectory as chat messages (system, then user/assistant pairs)."""
    messages = [Message(role="system", content=system_prompt)] if system_prompt else []
    for turn in trajectory.turns:
        messages.append(Message(role="user", content=turn.user))
        messages.append(Message(role="assistant", content=turn.text))
    return messages
