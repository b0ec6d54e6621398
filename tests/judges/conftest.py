"""Fixtures for judge tests: the embedded SmolLM2 judge (loaded once) and shared texts."""

from __future__ import annotations

import pytest

from narrative_eval.judges import judge_many
from narrative_eval.records import JudgeSpec, ModelSpec
from narrative_eval.studies.incremental.records import Constraint
from narrative_eval.studies.infilling.vocabulary import RUBRIC

SMOLLM2_JUDGE_MODEL = ModelSpec(id="smollm2-judge", backend="llama_cpp", weights="embedded:smollm2-135m-instruct")

PROBLEM = (
    "Mara found an old key under the floorboards of her grandmother's cottage. ______ "
    "Behind the door she found a room full of letters addressed to her."
)
CANDIDATE = "She tried it in every lock until the narrow door in the cellar finally opened."
TASK = "Write a short mystery story about a lighthouse keeper who finds a message in a bottle."
REQUIREMENTS = (
    Constraint(constraint_id="c1", type="premise", requirement="The keeper finds a message in a bottle.", introduced_at_shard=0),
    Constraint(constraint_id="c2", type="perspective", requirement="Told in the first person.", introduced_at_shard=1),
    Constraint(constraint_id="c3", type="ending", requirement="End with the keeper lighting the lamp.", introduced_at_shard=2),
)
STORY_A = (
    "I found the bottle at dawn, wedged between the rocks below the tower. The note inside was dated "
    "forty years ago and signed with my father's name. All day I read it again and again. When night "
    "came, I climbed the stairs and lit the lamp."
)
STORY_B = "The lighthouse was tall. A man lived there. He liked the sea. The end."


@pytest.fixture(scope="session")
def smollm2_backend():
    """The real embedded SmolLM2 GGUF through llama.cpp, loaded once for the session."""
    pytest.importorskip("llama_cpp")
    from narrative_eval.backends.registry import get_backend

    return get_backend(SMOLLM2_JUDGE_MODEL)


@pytest.fixture(scope="session")
def smollm2_judge() -> JudgeSpec:
    """The default embedded judge: greedy, seed 0, room for a checklist with reasons."""
    return JudgeSpec(id="smollm2-judge", model=SMOLLM2_JUDGE_MODEL, temperature=0.0, seed=0, max_retries=1, max_new_tokens=384)


def judge_infills(backend, spec: JudgeSpec, items):
    """Infills ({problem, candidate}) judged on the judge's rubric, by default the infilling study's."""
    return judge_many(backend, spec, spec.rubric or RUBRIC, items)
