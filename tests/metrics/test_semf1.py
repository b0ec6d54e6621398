"""Sem-F1 against a direct numpy computation from the same model's sentence embeddings."""

import numpy as np
import pytest

from narrative_eval.metrics.semf1 import sentence_encoder

CANDIDATE = "The storm broke at dawn. Maria ran to the harbour to save the boats."
CANDIDATE_SENTENCES = ["The storm broke at dawn.", "Maria ran to the harbour to save the boats."]
REFERENCE = "Thunder woke the village before sunrise. Maria hurried down to the docks. Nobody else came."
REFERENCE_SENTENCES = ["Thunder woke the village before sunrise.", "Maria hurried down to the docks.", "Nobody else came."]


def direct_semf1(model_path: str, candidate_sentences: list[str], reference_sentences: list[str]) -> float:
    encoder = sentence_encoder(model_path)
    # One sentence per call and our own normalisation: independent of the metric's batching.
    def unit(sentence: str) -> np.ndarray:
        vector = encoder.encode([sentence], convert_to_numpy=True)[0].astype(np.float64)
        return vector / np.linalg.norm(vector)

    cand = np.stack([unit(s) for s in candidate_sentences])
    ref = np.stack([unit(s) for s in reference_sentences])
    cosine = cand @ ref.T
    precision = np.mean([cosine[i].max() for i in range(len(candidate_sentences))])
    recall = np.mean([cosine[:, j].max() for j in range(len(reference_sentences))])
    return float(2 * precision * recall / (precision + recall))


def test_semf1_identical_texts_is_one(semf1):
    [score] = semf1.score([REFERENCE], [REFERENCE])
    assert score == pytest.approx(1.0, abs=1e-5)


def test_semf1_matches_direct_numpy_computation(semf1):
    from narrative_eval.metrics.text import split_sentences

    assert split_sentences(CANDIDATE) == CANDIDATE_SENTENCES
    assert split_sentences(REFERENCE) == REFERENCE_SENTENCES
    expected = direct_semf1(semf1.model_path, CANDIDATE_SENTENCES, REFERENCE_SENTENCES)
    [score] = semf1.score([CANDIDATE], [REFERENCE])
    assert 0.0 < score < 1.0
    assert score == pytest.approx(expected, abs=1e-5)


def test_semf1_is_symmetric(semf1):
    forward, backward = semf1.score([CANDIDATE, REFERENCE], [REFERENCE, CANDIDATE])
    assert forward == pytest.approx(backward, abs=1e-6)


def test_semf1_batched_equals_one_by_one(semf1):
    candidates = [CANDIDATE, "A dog barked.", "", "The boats were safe. Maria smiled."]
    references = [REFERENCE, "The cat slept all day.", "Something.", REFERENCE]
    batched = semf1.score(candidates, references)
    single = [semf1.score([c], [r])[0] for c, r in zip(candidates, references)]
    assert batched == pytest.approx(single, abs=1e-5)
    assert batched[2] == 0.0
    assert all(0.0 <= value <= 1.0 for value in batched)


def test_sem_f1_from_similarity_by_hand():
    from narrative_eval.metrics.semf1 import sem_f1_from_similarity

    # Rows: candidate sentences; columns: reference sentences.
    similarity = np.array([[0.9, 0.1, 0.2], [0.3, 0.5, 0.4]])
    precision = (0.9 + 0.5) / 2  # best per row
    recall = (0.9 + 0.5 + 0.4) / 3  # best per column
    assert sem_f1_from_similarity(similarity) == pytest.approx(2 * precision * recall / (precision + recall))
    assert sem_f1_from_similarity(np.array([[-0.2]])) == 0.0
