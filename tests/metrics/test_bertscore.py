"""BERTScore F1 against a direct computation of bert-score's definition from the model's hidden states.

Definition (bert-score, idf off): unit-normalised token embeddings from layer L; each candidate token's
best cosine over all reference tokens (special tokens included as match targets), averaged over the
candidate's tokens other than [CLS]/[SEP] -> precision; the converse -> recall; F1 = 2PR/(P+R).
"""

import numpy as np
import pytest
import torch

CANDIDATE = "The boats had already left the harbour when Maria arrived."
REFERENCE = "By the time Maria reached the docks, the fishing boats were gone."


@pytest.fixture(scope="session")
def reference_encoder(bertscore):
    """The same weights loaded independently with plain transformers (own tokenizer and model)."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(bertscore.model_path)
    model = AutoModel.from_pretrained(bertscore.model_path).eval()
    return tokenizer, model


def token_vectors(reference_encoder, text: str, layer: int) -> np.ndarray:
    tokenizer, model = reference_encoder
    ids = tokenizer(text, return_tensors="pt", truncation=True)
    with torch.no_grad():
        hidden = model(**ids, output_hidden_states=True).hidden_states[layer][0].double().numpy()
    return hidden / np.linalg.norm(hidden, axis=1, keepdims=True)


def direct_bertscore_f1(reference_encoder, candidate: str, reference: str, layer: int) -> float:
    cand, ref = token_vectors(reference_encoder, candidate, layer), token_vectors(reference_encoder, reference, layer)
    cosine = cand @ ref.T
    precision = cosine.max(axis=1)[1:-1].mean()  # drop [CLS] and [SEP] from the average
    recall = cosine.max(axis=0)[1:-1].mean()
    return float(2 * precision * recall / (precision + recall))


def test_identical_strings_score_one(bertscore):
    assert bertscore.score([REFERENCE, "x"], [REFERENCE, "x"]) == [pytest.approx(1.0, abs=1e-5)] * 2


def test_f1_is_symmetric(bertscore):
    forward, backward = bertscore.score([CANDIDATE, REFERENCE], [REFERENCE, CANDIDATE])
    assert forward == pytest.approx(backward, abs=1e-5)


def test_matches_direct_definition(bertscore, reference_encoder):
    expected = direct_bertscore_f1(reference_encoder, CANDIDATE, REFERENCE, bertscore.num_layers)
    [score] = bertscore.score([CANDIDATE], [REFERENCE])
    assert 0.0 < score < 1.0
    assert score == pytest.approx(expected, abs=1e-4)


def test_related_beats_unrelated(bertscore):
    related, unrelated = bertscore.score([CANDIDATE, "Quarterly revenue rose by four percent."], [REFERENCE] * 2)
    assert related > unrelated


def test_batched_equals_one_by_one_and_blank_is_zero(bertscore):
    candidates = [CANDIDATE, "", "A dog barked twice in the night.", REFERENCE]
    references = [REFERENCE, REFERENCE, "The night was silent.", CANDIDATE]
    batched = bertscore.score(candidates, references)
    single = [bertscore.score([c], [r])[0] for c, r in zip(candidates, references)]
    assert batched == pytest.approx(single, abs=1e-5)
    assert batched[1] == 0.0
