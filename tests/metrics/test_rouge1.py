import pytest


def test_rouge1_from_counted_unigrams(rouge1):
    # candidate: the x2, cat, sat, on, mat (6 unigrams); reference: the, cat, lay, on, a, mat (6).
    # Clipped overlap: the 1 + cat 1 + on 1 + mat 1 = 4, so P = R = 4/6 and F = 2/3.
    [score] = rouge1.score(["The cat sat on the mat."], ["the cat lay on a mat"])
    assert score == pytest.approx(2 / 3)


def test_rouge1_unequal_lengths(rouge1):
    # candidate 3 unigrams all matched: P = 1; reference 6 unigrams: R = 1/2; F = 2PR/(P+R) = 2/3.
    [score] = rouge1.score(["the cat sat"], ["the cat sat on the mat"])
    assert score == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_rouge1_does_not_stem(rouge1):
    # "cats"/"cat" and "running"/"run" would match under stemming; without it only "the" overlaps.
    [score] = rouge1.score(["the cats running"], ["the cat run"])
    assert score == pytest.approx(1 / 3)


def test_rouge1_blank_candidate_scores_zero(rouge1):
    assert rouge1.score(["", "  "], ["a reference", "another"]) == [0.0, 0.0]
