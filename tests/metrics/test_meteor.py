"""METEOR (NLTK, alpha=0.9, beta=3, gamma=0.5) against values worked out from its formula:

Fmean = P*R / (alpha*P + (1-alpha)*R); penalty = gamma * (chunks/matches)**beta; score = Fmean * (1 - penalty).
"""

import gzip
import json

import pytest

from narrative_eval.metrics import wordnet as wn_setup


def meteor_formula(matches: int, cand_len: int, ref_len: int, chunks: int) -> float:
    precision, recall = matches / cand_len, matches / ref_len
    fmean = precision * recall / (0.9 * precision + 0.1 * recall)
    return fmean * (1 - 0.5 * (chunks / matches) ** 3)


def test_exact_match_is_close_to_one(meteor):
    # 6 tokens matched in one chunk: 1 - 0.5 * (1/6)**3.
    [score] = meteor.score(["The cat sat on the mat"], ["the cat sat on the mat"])
    assert score == pytest.approx(1 - 0.5 / 216)
    assert score > 0.99


def test_partial_match_by_hand(meteor):
    # 3 of 3 candidate tokens match the first 3 of 6 reference tokens, in one chunk. (No repeated
    # words: NLTK aligns a repeated word to its last occurrence, which would split the chunk.)
    [score] = meteor.score(["the cat sat"], ["the cat sat on a mat"])
    assert score == pytest.approx(meteor_formula(matches=3, cand_len=3, ref_len=6, chunks=1))
    assert score == pytest.approx(0.516569, abs=1e-6)


def test_stem_and_synonym_matches(meteor):
    # "cats" ~ "cat" by Porter stem, "car" ~ "auto" by WordNet synonymy: 2 matches, 1 chunk each pair.
    # (NLTK looks synonyms up for the stemmed words, so pairs must survive Porter stemming unchanged.)
    scores = meteor.score(["the cats", "the car"], ["the cat", "the auto"])
    assert scores == [pytest.approx(meteor_formula(2, 2, 2, 1))] * 2


def test_no_overlap_is_zero(meteor):
    assert meteor.score(["zebra quartz"], ["the cat"]) == [0.0]


def test_wordnet_loads_from_system_copy():
    wn_setup.ensure_wordnet()
    assert wn_setup.verify_wordnet() > 0


def test_lexnames_parsed_from_man_page():
    text = gzip.decompress(wn_setup.LEXNAMES_MAN_PAGE.read_bytes()).decode()
    rows = wn_setup.parse_lexnames_man_page(text)
    assert len(rows) == 45
    assert wn_setup.format_lexnames(rows).splitlines()[0] == "00\tadj.all\t3"
    assert rows[18] == (18, "noun.person", 1)
    assert rows[44] == (44, "adj.ppl", 3)
    assert {category for _, name, category in rows if name.startswith("verb.")} == {2}


def test_install_into_fresh_directory(tmp_path):
    corpus = wn_setup.install_from_system(tmp_path)
    assert corpus == tmp_path / "corpora" / "wordnet"
    assert (corpus / "lexnames").read_text().startswith("00\tadj.all\t3\n01\tadj.pert\t3\n")
    assert (corpus / "data.noun").stat().st_size == (wn_setup.SYSTEM_WORDNET_DIR / "data.noun").stat().st_size
    # A second install over a complete copy is harmless.
    wn_setup.install_from_system(tmp_path)
    assert (corpus / "index.sense").is_file()


def test_missing_system_wordnet_names_the_command(tmp_path):
    with pytest.raises(wn_setup.WordNetUnavailable, match="wordnet-base"):
        wn_setup.install_from_system(tmp_path / "out", source_dir=tmp_path / "nowhere")


def _shipped_sentence_pairs(repo_root) -> list[tuple[str, str]]:
    """Each sentence of the shipped infilling passages against the next one: 77 real pairs."""
    sentences = []
    for line in (repo_root / "data/infilling/sample.jsonl").read_text().splitlines():
        sentences += [s.strip() for s in json.loads(line)["source_text"].split("<eos>") if s.strip()]
    return list(zip(sentences, sentences[1:]))


def test_same_as_plain_nltk_meteor(meteor, repo_root):
    """Our WordNet reader skips the multilingual sense map that NLTK builds on load; the scores are NLTK's own."""
    from nltk.corpus import wordnet
    from nltk.translate.meteor_score import meteor_score

    from narrative_eval.metrics.text import tokenize_words

    pairs = [
        ("The fishermen hurried to the docks, but the boats had gone.", "The boats were gone when the men reached the harbour."),
        ("She smiled quietly and closed the letter.", "Closing the letter, she gave a quiet smile."),
        ("Cars and automobiles filled the big road.", "The large street was full of autos."),
        *_shipped_sentence_pairs(repo_root),
    ]
    ours = meteor.score([c for c, _ in pairs], [r for _, r in pairs])
    plain = [meteor_score([tokenize_words(r)], tokenize_words(c), wordnet=wordnet) for c, r in pairs]
    assert ours == pytest.approx(plain, abs=1e-12)
    assert all(0.0 < value < 1.0 for value in ours)
