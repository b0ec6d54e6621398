"""Fuzzed model replies, judge replies and --set values: a value or a listed error, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from fuzz_inputs import FEW, MANY, load_bytes, texts
from hypothesis import example, given
from hypothesis import strategies as st

from narrative_eval.annotations import read_ratings_csv
from narrative_eval.config import apply_overrides, load_config, parse_override
from narrative_eval.errors import UserError
from narrative_eval.judges.rubric import load_rubric
from narrative_eval.judges.validate import JudgeReplyError, parse_reply
from narrative_eval.studies.infilling.extraction import extract_answer

REPO = Path(__file__).resolve().parents[2]
PROBLEM = "Mara locked the shop at dusk. ______ By morning the window display had been rearranged."
DIMENSIONS = ("fluency", "faithfulness", "coherence", "consistency", "informativeness")
RUBRICS = {name: load_rubric(name) for name in ("infilling_narrative", "pairwise", "creative_checklist")}
REQUIREMENT_IDS = ("c1", "c2")


# --------------------------------------------------------------------------- answer extraction


@MANY
@given(reply=texts, problem=st.one_of(st.just(PROBLEM), texts))
@example(reply="<answer>" * 5000, problem=PROBLEM)
@example(reply="</think>" * 3, problem="______")
def test_extraction_gives_an_answer_or_none_with_a_status(reply, problem):
    found = extract_answer(reply, problem, ["an example answer"])
    assert found.status in ("tag", "echo", "fallback", "none")
    assert (found.answer is None) == (found.status == "none")
    if found.answer is not None:
        assert found.answer.strip() and found.answer.lower() != "an example answer"


# --------------------------------------------------------------------------- judge replies

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 8) | st.floats(allow_nan=True) | st.sampled_from(["4", "A", "c1", ""]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from([*DIMENSIONS, "c1", "c2", "items", "score", "reason", "id", "x"]), children,
                      max_size=6),
    max_leaves=20,
)


@st.composite
def judge_replies(draw) -> str:
    """JSON-ish text: a JSON value, maybe fenced or inside prose, maybe cut short."""
    text = json.dumps(draw(json_values))
    wrapper = draw(st.sampled_from(["{}", "```json\n{}\n```", "Here is my verdict: {} Thanks.", "{}}}", "{{{}"]))
    text = wrapper.replace("{}", text, 1) if "{}" in wrapper else wrapper + text
    cut = draw(st.integers(0, len(text)))
    return draw(st.sampled_from([text, text[:cut], text + draw(texts)]))


@MANY
@given(reply=st.one_of(judge_replies(), texts), rubric=st.sampled_from(sorted(RUBRICS)))
@example(reply="[" * 100_000, rubric="infilling_narrative")
@example(reply="{" * 5000, rubric="pairwise")
def test_judge_reply_validation_returns_scores_or_a_reason(reply, rubric):
    try:
        scores, details = parse_reply(RUBRICS[rubric], reply, REQUIREMENT_IDS)
    except JudgeReplyError as error:
        assert str(error)
        return
    assert isinstance(scores, dict) and isinstance(details, dict)


def test_a_valid_reply_in_prose_validates():
    """The property above is not vacuous: well-formed answers do come through."""
    reply = "Sure. " + json.dumps({d: 4 for d in DIMENSIONS}) + " Done."
    scores, _ = parse_reply(RUBRICS["infilling_narrative"], reply)
    assert scores == {d: 4.0 for d in DIMENSIONS}


# --------------------------------------------------------------------------- --set


@MANY
@given(text=texts)
@example(text="a..b=1")
@example(text="models=[smollm2")
@example(text="generation.temperature.x=1")
def test_set_parsing_gives_a_path_and_value_or_a_user_error(text):
    try:
        path, _ = parse_override(text)
    except UserError as error:
        assert error.problems[0].startswith("--set ")
        return
    assert path and all(path)
    try:
        apply_overrides({"generation": {"temperature": 0.3}, "seeds": [0]}, [text])
    except UserError as error:
        assert "is not a mapping" in error.problems[0]


@FEW
@given(overrides=st.lists(texts.map(lambda t: f"seeds={t}") | texts, max_size=3))
def test_a_quickstart_config_with_fuzzed_overrides_loads_or_says_why(overrides):
    try:
        load_config(REPO / "experiments" / "configs" / "quickstart.yaml", overrides)
    except UserError as error:
        assert error.problems and all(isinstance(p, str) and p for p in error.problems)


# --------------------------------------------------------------------------- ratings and score records

RATINGS_HEADER = "rater,model,prompt_setting,instance_id,seed," + ",".join(DIMENSIONS)


@FEW
@given(body=texts)
def test_ratings_csv_on_arbitrary_text(body):
    load_bytes({"ratings.csv": (RATINGS_HEADER + "\n" + body).encode("utf-8")},
               lambda paths: read_ratings_csv(paths["ratings.csv"], DIMENSIONS))


@FEW
@given(body=texts)
def test_score_records_on_arbitrary_text(body):
    from narrative_eval.studies.incremental.score_records import load_score_records

    load_bytes({"scores.jsonl": body.encode("utf-8")}, lambda paths: load_score_records(paths["scores.jsonl"]))


@FEW
@given(data=st.binary(max_size=1024))
@example(data=b"\xff\xfe" + '{"record_id": 1}\n'.encode("utf-16-le"))
@example(data=b"[" * 100_000)
def test_score_records_on_arbitrary_bytes(data):
    from narrative_eval.studies.incremental.score_records import load_score_records

    load_bytes({"scores.jsonl": data}, lambda paths: load_score_records(paths["scores.jsonl"]))


def test_ratings_csv_on_undecodable_bytes():
    load_bytes({"ratings.csv": b"\xff\xfe\x00rater"}, lambda paths: read_ratings_csv(paths["ratings.csv"], DIMENSIONS))
