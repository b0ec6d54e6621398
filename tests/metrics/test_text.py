from narrative_eval.metrics.text import split_sentences, tokenize_words


def test_tokenize_lowercases_and_separates_punctuation():
    assert tokenize_words("The Dog's bark, LOUD!") == ["the", "dog's", "bark", ",", "loud", "!"]


def test_tokenize_keeps_numbers_acronyms_and_hyphenated_words():
    assert tokenize_words("U.S. troops: 3.5 km, well-known") == ["u.s.", "troops", ":", "3.5", "km", ",", "well-known"]


def test_split_sentences_on_terminators_and_eos_markers():
    text = 'Mr. Smith left. She asked "Why?" It rained <eos> The end'
    assert split_sentences(text) == ["Mr. Smith left.", 'She asked "Why?"', "It rained", "The end"]


def test_split_sentences_keeps_initials_together():
    assert split_sentences("J. R. R. Tolkien wrote it. Then he slept.") == [
        "J. R. R. Tolkien wrote it.",
        "Then he slept.",
    ]


def test_split_sentences_of_blank_text_is_empty():
    assert split_sentences("   ") == []
    assert split_sentences("no terminator here") == ["no terminator here"]
