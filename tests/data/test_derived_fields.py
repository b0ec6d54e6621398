"""Sentence splitting, blank position and domain: the fields derived from an instance."""

from __future__ import annotations

import math

import pytest

from narrative_eval.data import domain, sentences, split_problem
from narrative_eval.studies.infilling.builder import make_instance
from narrative_eval.studies.infilling.positions import blank_position, position_of


def test_eos_separators_win() -> None:
    text = "Dr. Lee arrived. <eos> She sat. <eos>  It rained on Mr. Park.  "
    assert sentences(text) == ["Dr. Lee arrived.", "She sat.", "It rained on Mr. Park."]


def test_regex_splitter_handles_abbreviations_initials_and_quotes() -> None:
    text = (
        "Mr. Smith met Dr. J. K. Rowe in the U.S. capital at 5 p.m. on Friday. They talked for 2.5 hours! "
        '"Was it useful?" she asked. "Very," he said. See No. 4 on the list. The Sun set. Then we left?'
    )
    assert sentences(text) == [
        "Mr. Smith met Dr. J. K. Rowe in the U.S. capital at 5 p.m. on Friday.",
        "They talked for 2.5 hours!",
        '"Was it useful?" she asked.',
        '"Very," he said.',
        "See No. 4 on the list.",
        "The Sun set.",
        "Then we left?",
    ]
    assert sentences("") == []
    assert sentences("No final stop here") == ["No final stop here"]


@pytest.mark.parametrize("n_sentences", [3, 5, 6, 7, 8, 9, 12])
def test_position_follows_the_ceil_rule(n_sentences: int) -> None:
    first_cut = math.ceil(n_sentences / 3)
    second_cut = math.ceil(2 * n_sentences / 3)
    for unit_idx in range(n_sentences):
        expected = "opening" if unit_idx <= first_cut else "middle" if unit_idx <= second_cut else "closing"
        assert position_of(unit_idx, n_sentences) == expected


def test_position_on_hand_made_passages() -> None:
    nine = [f"Sentence number {i} stands here." for i in range(9)]
    # ceil(9/3) = 3 and ceil(18/3) = 6
    assert [blank_position(make_instance("wiki", "p9", nine, i, 1)) for i in range(9)] == (
        ["opening"] * 4 + ["middle"] * 3 + ["closing"] * 2
    )
    five = [f"Story line {i} goes here." for i in range(5)]
    # ceil(5/3) = 2 and ceil(10/3) = 4: a five-sentence story never reaches closing
    assert [blank_position(make_instance("roc", "p5", five, i, 1)) for i in range(5)] == (
        ["opening"] * 3 + ["middle"] * 2
    )
    with pytest.raises(ValueError):
        position_of(0, 0)


@pytest.mark.parametrize(
    ("dataset", "expected"),
    [
        ("wikipedia", "encyclopedic"),
        ("Wiki", "encyclopedic"),
        ("encyclopedic", "encyclopedic"),
        ("cnn_dailymail", "news"),
        ("CNN", "news"),
        ("cnn-dailymail", "news"),
        ("news", "news"),
        ("rocstories", "story"),
        ("ROC", "story"),
        ("story", "story"),
        ("sind", "visual"),
        ("VIST", "visual"),
        ("visual", "visual"),
        ("fables", "fables"),
    ],
)
def test_domain_mapping(dataset: str, expected: str) -> None:
    assert domain(dataset) == expected


def test_split_problem() -> None:
    assert split_problem("A. ________ B.") == ("A. ", " B.")
    with pytest.raises(ValueError):
        split_problem("A. ___ B. ___")
