"""chrF checked against a direct implementation of its definition (Popović 2015, sacrebleu 2 averaging)."""

from collections import Counter

import pytest


def direct_chrf(candidate: str, reference: str, char_order: int = 6, beta: float = 2.0) -> float:
    """Character n-gram precision and recall averaged over orders 1..6 (whitespace removed), then F-beta."""
    hyp, ref = "".join(candidate.split()), "".join(reference.split())
    precisions, recalls = [], []
    for n in range(1, char_order + 1):
        hyp_grams = Counter(hyp[i : i + n] for i in range(len(hyp) - n + 1))
        ref_grams = Counter(ref[i : i + n] for i in range(len(ref) - n + 1))
        if not hyp_grams or not ref_grams:
            continue  # an order absent on either side does not count
        matched = sum((hyp_grams & ref_grams).values())
        precisions.append(matched / sum(hyp_grams.values()))
        recalls.append(matched / sum(ref_grams.values()))
    precision, recall = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    if precision + recall == 0:
        return 0.0
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


def test_chrf_tiny_pair_by_hand(chrf):
    # "ab" vs "abc": order 1 P=2/2 R=2/3; order 2 P=1/1 R=1/2; order 3 has no candidate n-gram.
    # Averages: P = 1, R = (2/3 + 1/2) / 2 = 7/12; F2 = 5 * P * R / (4 * P + R).
    recall = (2 / 3 + 1 / 2) / 2
    expected = 5 * recall / (4 + recall)
    [score] = chrf.score(["ab"], ["abc"])
    assert score == pytest.approx(expected)


@pytest.mark.parametrize(
    ("candidate", "reference"),
    [
        ("The cat sat on the mat.", "The cat lay on a mat."),
        ("She opened the door and stepped out into the rain.", "Stepping into the storm, she shut the door."),
        ("entirely different", "zzz qqq"),
    ],
)
def test_chrf_matches_direct_definition(chrf, candidate, reference):
    [score] = chrf.score([candidate], [reference])
    assert score == pytest.approx(direct_chrf(candidate, reference), abs=1e-9)


def test_chrf_identical_is_one(chrf):
    assert chrf.score(["A quiet evening."], ["A quiet evening."]) == [pytest.approx(1.0)]
