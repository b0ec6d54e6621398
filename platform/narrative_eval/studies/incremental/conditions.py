"""The incremental-delivery study's delivery conditions: how a brief is split into user turns.

- full: one user turn holding the full instruction (the reference every other condition is compared with).
- sharded: one user turn per shard, in order; every reply stays in the history.
- recap: sharded, then one more turn restating every shard and asking for the final story.
- snowball: like sharded, but each turn repeats every earlier shard before the new one.
"""

from __future__ import annotations

from narrative_eval.prompts.render import fill
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.turns import TurnTemplates, condition, listing
from narrative_eval.studies.incremental.vocabulary import FULL, RECAP, SHARDED, SNOWBALL


@condition(FULL)
def full(task: WritingTask, templates: TurnTemplates) -> list[str]:
    return [task.full_instruction]


@condition(SHARDED)
def sharded(task: WritingTask, templates: TurnTemplates) -> list[str]:
    return list(task.shards)


@condition(RECAP, replanning=True)
def recap(task: WritingTask, templates: TurnTemplates) -> list[str]:
    shards = list(task.shards)
    return shards + [fill(templates.recap, {"requirements": listing(shards, templates)})]


@condition(SNOWBALL, replanning=True)
def snowball(task: WritingTask, templates: TurnTemplates) -> list[str]:
    shards = list(task.shards)
    return [shards[0]] + [
        fill(templates.snowball, {"previous": listing(shards[:k], templates), "current": shards[k]}) for k in range(1, len(shards))
    ]
