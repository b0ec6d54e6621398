"""Delivery conditions: the user turns each condition sends, and what a real engine actually receives through the
library's multi-turn driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from narrative_eval.evaluation import Item
from narrative_eval.multi_turn import Conversation, deliver, messages_of
from narrative_eval.records import GenerationParams, Message, derived_seed
from narrative_eval.studies.incremental.records import WritingTask
from narrative_eval.studies.incremental.tasks import load_tasks
from narrative_eval.studies.incremental.turns import conversation_turns, load_system_prompt, load_turn_templates

REPO = Path(__file__).resolve().parents[2]
TASKS = load_tasks(REPO / "data" / "creative" / "tasks.json", REPO / "data" / "creative" / "constraints.jsonl")
SYSTEM = load_system_prompt("default")
# Greedy, short, and stopped at the first clause end, so every turn finishes well before the limit.
SHORT = GenerationParams(temperature=0.0, max_new_tokens=64, stop=(",", ".", ";", ":", "!", "?", "\n"))
# A word or two per reply: for checks that only need the conversation's shape.
TINY = GenerationParams(temperature=0.0, max_new_tokens=12, stop=(" ", ",", ".", "\n"))


def delivered(backend, tasks: list[WritingTask], condition: str, system: str, params: GenerationParams, seed: int,
              **options) -> list[Conversation]:
    """Each task's conversation under `condition`, as a cell of the study delivers it."""
    items = [Item(task.story_id, {}, {}) for task in tasks]
    return deliver(backend, items, [conversation_turns(task, condition) for task in tasks], condition, system, params,
                   seed, **options)


def test_default_system_prompt_is_the_studys():
    assert SYSTEM == (
        "You are a skilled creative writer. Follow the user’s instructions for the story precisely, "
        "including any exact phrases, constraints, or stylistic requirements."
    )


def test_full_and_sharded_turns():
    task = TASKS[0]
    assert conversation_turns(task, "full") == [task.full_instruction]
    assert conversation_turns(task, "sharded") == list(task.shards)


def test_recap_adds_one_turn_restating_every_shard_in_order():
    task = TASKS[1]
    turns = conversation_turns(task, "recap")
    assert turns[:-1] == list(task.shards)
    recap = turns[-1]
    templates = load_turn_templates()
    listing = "\n".join(f"{k}. {shard}" for k, shard in enumerate(task.shards, start=1))
    assert recap == templates.recap.replace("{{requirements}}", listing)
    positions = [recap.index(shard) for shard in task.shards]
    assert positions == sorted(positions)
    assert "{{" not in recap


def test_snowball_repeats_every_earlier_shard_before_the_new_one():
    task = TASKS[2]
    turns = conversation_turns(task, "snowball")
    assert len(turns) == len(task.shards)
    assert turns[0] == task.shards[0]
    for k in range(1, len(task.shards)):
        earlier = [turns[k].index(f"{j + 1}. {task.shards[j]}") for j in range(k)]
        assert earlier == sorted(earlier)
        # The new shard comes after every repeated one, and no later shard leaks in.
        assert turns[k].rindex(task.shards[k]) > earlier[-1]
        for later in task.shards[k + 1 :]:
            assert later not in turns[k]


def test_unknown_condition_is_refused():
    with pytest.raises(ValueError, match="unknown condition"):
        conversation_turns(TASKS[0], "whispered")


def test_request_seeds_depend_on_story_attempt_and_turn_only():
    seeds = {derived_seed(0, "fantasy_001", 0, 0), derived_seed(0, "fantasy_002", 0, 0), derived_seed(0, "fantasy_001", 1, 0),
             derived_seed(0, "fantasy_001", 0, 1), derived_seed(1, "fantasy_001", 0, 0)}
    assert len(seeds) == 5
    assert derived_seed(0, "fantasy_001", 0, 0) == derived_seed(0, "fantasy_001", 0, 0)


@pytest.mark.slow
def test_sharded_sends_exactly_the_shards_in_order_with_full_history(recording_smollm2):
    tasks = [TASKS[0], TASKS[5]]  # 7 and 7 shards from two genres
    trajectories = delivered(recording_smollm2, tasks, "sharded", SYSTEM, SHORT, seed=3)

    n_turns = max(len(t.shards) for t in tasks)
    assert len(recording_smollm2.calls) == n_turns, "each turn of every task goes out in one call"
    for trajectory, task in zip(trajectories, tasks):
        assert not trajectory.truncated, trajectory.error
        assert [turn.user for turn in trajectory.turns] == list(task.shards)
        assert [turn.final for turn in trajectory.turns] == [False] * (len(task.shards) - 1) + [True]
    for k, call in enumerate(recording_smollm2.calls):
        expected_batch = [i for i, task in enumerate(tasks) if k < len(task.shards)]
        assert len(call) == len(expected_batch)
        for sent, i in zip(call, expected_batch):
            task, trajectory = tasks[i], trajectories[i]
            history = [Message(role="system", content=SYSTEM)]
            for j in range(k):
                history.append(Message(role="user", content=task.shards[j]))
                history.append(Message(role="assistant", content=trajectory.turns[j].text))
            history.append(Message(role="user", content=task.shards[k]))
            assert sent == history
        seeds = [p.seed for p in recording_smollm2.params[k]]
        assert seeds == [derived_seed(3, tasks[i].story_id, 0, k) for i in expected_batch]
    assert messages_of(trajectories[0], SYSTEM)[: 2 * n_turns] == recording_smollm2.calls[-1][0][: 2 * n_turns]
    # The engine's own counts are kept per turn; later turns carry the growing history.
    prompts = [turn.prompt_tokens for turn in trajectories[0].turns]
    assert prompts == sorted(prompts) and prompts[0] > 0


def test_full_sends_one_turn_with_the_whole_brief(recording_smollm2):
    [trajectory] = delivered(recording_smollm2, [TASKS[3]], "full", SYSTEM, TINY, seed=0)
    assert recording_smollm2.calls == [[[Message(role="system", content=SYSTEM), Message(role="user", content=TASKS[3].full_instruction)]]]
    assert len(trajectory.turns) == 1 and trajectory.turns[0].final
    assert trajectory.final_text == trajectory.turns[0].text


@pytest.mark.slow
def test_snowball_and_recap_send_their_turn_texts(recording_smollm2):
    task = TASKS[12]  # romance_001: six shards keep the snowball short
    assert len(task.shards) == 6
    for condition in ("snowball", "recap"):
        recording_smollm2.calls.clear()
        [trajectory] = delivered(recording_smollm2, [task], condition, SYSTEM, TINY, seed=0)
        sent_users = [call[0][-1].content for call in recording_smollm2.calls]
        assert sent_users == conversation_turns(task, condition)
        assert len(recording_smollm2.calls[-1][0]) == 1 + 2 * len(sent_users) - 1
        assert trajectory.turns[-1].final and not trajectory.truncated


def test_length_limit_flags_the_trajectory_and_stops_it(recording_smollm2):
    tiny = GenerationParams(temperature=0.0, max_new_tokens=2)
    [trajectory] = delivered(recording_smollm2, [TASKS[0]], "sharded", SYSTEM, tiny, seed=0)
    assert trajectory.truncated and trajectory.error is None  # cut, not failed
    assert len(trajectory.turns) == 1 and trajectory.turns[0].finish_reason == "length"
    assert not trajectory.turns[0].final, "a truncated reply is never the judged one"
    assert len(recording_smollm2.calls) == 1


@pytest.mark.slow
def test_continue_after_length_keeps_the_flag_and_the_whole_conversation(recording_smollm2):
    tiny = GenerationParams(temperature=0.0, max_new_tokens=2)
    task = TASKS[12]
    [trajectory] = delivered(recording_smollm2, [task], "sharded", SYSTEM, tiny, seed=0, continue_after_length=True)
    assert trajectory.truncated
    assert [turn.user for turn in trajectory.turns] == list(task.shards)
    assert trajectory.turns[-1].final
    assert len(recording_smollm2.calls) == len(task.shards)
