"""Building instances from passages: blank placement, gold text, determinism, the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from narrative_eval.data import BLANK, DataErrors, count_blanks, load_instances, sentences
from narrative_eval.studies.infilling.builder import build_instances, load_passages, start_band
from narrative_eval.studies.infilling.positions import blank_position

REPO = Path(__file__).resolve().parents[2]

NINE = [
    "The harbor town of Wexmouth sits at the mouth of a slow brown river.",
    "Its first houses were built by fishermen who dried their nets on the shingle.",
    "A stone quay was added later, when coastal traders began to call.",
    "The quay brought timber, salt and coal to the growing town.",
    "In the nineteenth century a railway reached Wexmouth from the north.",
    "Trains carried fresh fish to inland cities overnight.",
    "The fishing fleet grew to more than sixty boats.",
    "Today only a handful of boats remain in the harbor.",
    "Most visitors now come for the beaches and the old quay.",
]
FIVE = [
    "Mia wanted to win the school art prize.",
    "She spent every evening painting the view from her window.",
    "The night before the deadline, she spilled water on the painting.",
    "She stayed up late and painted the whole scene again.",
    "The judges gave her second prize and praised the bright colors.",
]


def test_every_feasible_pair_gets_a_correct_instance() -> None:
    instances = build_instances([("wikipedia", "w1", " ".join(NINE))], seed=3)
    pairs = {(instance.n, blank_position(instance)) for instance in instances}
    expected = {(n, p) for n in (1, 2, 3) for p in ("opening", "middle", "closing") if start_band(9, n, p)}
    assert pairs == expected and len(instances) == len(expected)
    for instance in instances:
        start, n = instance.unit_idx, instance.n
        assert count_blanks(instance.problem) == 1 and instance.problem.count(BLANK) == 1
        assert instance.gold_answer == " ".join(NINE[start : start + n])
        assert instance.problem == " ".join(NINE[:start] + [BLANK] + NINE[start + n :])
        assert sentences(instance.source_text) == NINE
        assert instance.unit == "sentence(s)"


def test_requested_position_and_n_are_respected() -> None:
    instances = build_instances([("wikipedia", "w1", " ".join(NINE))], n_values=(2,), positions=("closing",))
    assert [(i.n, blank_position(i)) for i in instances] == [(2, "closing")]
    assert instances[0].unit_idx == 7  # the only closing start that fits two sentences


def test_impossible_pairs_are_skipped_for_short_passages() -> None:
    five = build_instances([("rocstories", "r1", " <eos> ".join(FIVE))])
    assert "closing" not in {blank_position(i) for i in five}
    assert {(i.n, blank_position(i)) for i in five} == {
        (1, "opening"), (2, "opening"), (3, "opening"), (1, "middle"), (2, "middle")
    }
    three = build_instances([("rocstories", "r2", "One. Two. Three.")])
    assert all(i.n < 3 for i in three)
    assert build_instances([("rocstories", "r3", "Only one sentence.")]) == []


def test_same_seed_same_instances_other_seed_differs() -> None:
    passages = [("story", f"s{i}", " ".join(FIVE)) for i in range(10)] + [("wiki", "w", " ".join(NINE))]
    first = build_instances(passages, seed=11)
    assert build_instances(passages, seed=11) == first
    assert build_instances(passages, seed=12) != first
    # A passage's instances do not depend on the passages around it.
    alone = build_instances(passages[3:4], seed=11)
    assert alone == [i for i in first if i.ref_id == "s3"]


def test_per_passage_spreads_n_and_positions() -> None:
    instances = build_instances([("wiki", "w", " ".join(NINE))], seed=0, per_passage=3)
    assert sorted(i.n for i in instances) == [1, 2, 3]
    assert {blank_position(i) for i in instances} == {"opening", "middle", "closing"}


def test_bad_arguments_and_duplicates_are_refused() -> None:
    with pytest.raises(ValueError):
        build_instances([("wiki", "w", " ".join(NINE))], n_values=(4,))
    with pytest.raises(ValueError):
        build_instances([("wiki", "w", " ".join(NINE))], positions=("end",))
    with pytest.raises(ValueError, match="duplicate"):
        build_instances([("wiki", "w", " ".join(NINE)), ("wiki", "w", " ".join(FIVE))])


def test_load_passages_reports_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "passages.jsonl"
    path.write_text(
        json.dumps({"dataset": "story", "ref_id": "a", "text": " ".join(FIVE)})
        + "\n{broken\n"
        + json.dumps({"dataset": "story", "ref_id": "b", "text": ""})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DataErrors) as info:
        load_passages(path)
    assert [(e.line, e.message.split(":")[0]) for e in info.value.errors] == [
        (2, "invalid JSON"),
        (3, "missing or empty field(s)"),
    ]


def test_command_line_builds_a_loadable_file(tmp_path: Path) -> None:
    passages = tmp_path / "passages"
    passages.mkdir()
    rows = [{"dataset": "story", "ref_id": f"s{i}", "text": " ".join(FIVE)} for i in range(4)]
    rows.append({"dataset": "encyclopedic", "ref_id": "e1", "text": " ".join(NINE)})
    (passages / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "bench.csv"
    sample = tmp_path / "sample.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "narrative_eval.studies.infilling.builder", "--passages", str(passages), "--out", str(out),
         "--seed", "0", "--sample-out", str(sample), "--sample-per-dataset", "2"],
        capture_output=True, text=True, env=env, check=True,
    )
    assert "15 instances" in result.stdout
    assert "RuntimeWarning" not in result.stderr
    built = load_instances(out)
    assert built == build_instances(load_passages(passages), seed=0, per_passage=3)
    picked = load_instances(sample)
    assert Counter(i.dataset for i in picked) == {"story": 2, "encyclopedic": 2}
    assert all(i in built for i in picked)
