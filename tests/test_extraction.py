"""Answer extraction: every pattern of the study's extraction table, and honest statuses."""

from narrative_eval.studies.infilling.extraction import extract_answer, repeats_passage

PROBLEM = "Erin loved to play football. ______ He stopped playing football with them."


def test_answer_tags_case_insensitive():
    reply = "Sure! <answer>His friends played too roughly.</ANSWER> Hope this helps."
    result = extract_answer(reply, PROBLEM)
    assert (result.answer, result.status, result.success) == ("His friends played too roughly.", "tag", True)


def test_first_non_empty_tag_wins():
    reply = "<ANSWER></ANSWER> then <ANSWER>They hurt him.</ANSWER> and <ANSWER>Other.</ANSWER>"
    assert extract_answer(reply, PROBLEM).answer == "They hurt him."


def test_reasoning_up_to_think_is_removed():
    reply = "<think>Maybe <ANSWER>wrong</ANSWER> hmm.</think>\n<ANSWER>He got hurt in a game.</ANSWER>"
    result = extract_answer(reply, PROBLEM)
    assert result.answer == "He got hurt in a game."
    assert result.think_removed and result.status == "tag"


def test_unclosed_tag_is_a_near_miss_still_tagged():
    reply = "<ANSWER> He always played with his friends after school.\n\nLet me know if you need more."
    result = extract_answer(reply, PROBLEM)
    assert result.status == "tag"
    assert result.answer == "He always played with his friends after school."


def test_closing_tag_only():
    result = extract_answer("His friends tackled him too hard.</ANSWER>", PROBLEM)
    assert (result.answer, result.status) == ("His friends tackled him too hard.", "tag")


def test_square_bracket_tags():
    result = extract_answer("[ANSWER]They were rough.[/ANSWER]", PROBLEM)
    assert (result.answer, result.status) == ("They were rough.", "tag")


def test_answer_label():
    result = extract_answer("Answer: His friends were too rough with him.", PROBLEM)
    assert (result.answer, result.status) == ("His friends were too rough with him.", "tag")


def test_echo_of_passage_with_blank_filled():
    reply = ("Erin loved to play football. His friends always tackled him hard. "
             "He stopped playing football with them.")
    result = extract_answer(reply, PROBLEM)
    assert (result.answer, result.status) == ("His friends always tackled him hard.", "echo")


def test_echo_with_preamble_and_blank_at_opening():
    problem = "______ She returned the books five weeks later."
    reply = "Here is the story: One day, Quinn borrowed ten books. She returned the books five weeks later."
    result = extract_answer(reply, problem)
    # With nothing before the blank, only the text after anchors the echo: the preamble stays in.
    assert result.status == "echo"
    assert result.answer.endswith("One day, Quinn borrowed ten books.")


def test_echo_that_keeps_the_blank_is_not_an_answer():
    reply = "Erin loved to play football. ______ He stopped playing football with them."
    result = extract_answer(reply, PROBLEM)
    assert result.status == "fallback"


def test_whole_reply_is_a_marked_fallback():
    result = extract_answer("He broke his leg during practice.", PROBLEM)
    assert (result.answer, result.status, result.success) == ("He broke his leg during practice.", "fallback", False)


def test_empty_reply_has_no_answer():
    for reply in ("", "   \n", "<think>only thinking</think>", "<ANSWER></ANSWER>"):
        result = extract_answer(reply, PROBLEM)
        assert result.answer is None and result.status == "none", reply


def test_copied_format_example_is_ignored():
    reply = "<ANSWER>fox</ANSWER> <ANSWER>His friends hurt him.</ANSWER>"
    assert extract_answer(reply, PROBLEM, ignore_answers=["fox", "brown fox"]).answer == "His friends hurt him."
    assert extract_answer("<ANSWER>fox</ANSWER>", PROBLEM, ignore_answers=["fox"]).status == "none"


def test_a_fill_that_repeats_the_passage_is_flagged():
    kept_blank = extract_answer("Erin loved to play football. ______ He stopped playing football with them.", PROBLEM)
    assert kept_blank.status == "fallback" and repeats_passage(kept_blank.answer, PROBLEM)
    changed = "Erin loved to play football, and one day he got hurt. He stopped playing football with them."
    assert repeats_passage(extract_answer(changed, PROBLEM).answer, PROBLEM)
    for fill in ("His friends always tackled him hard.", "He loved football too much.", None, ""):
        assert not repeats_passage(fill, PROBLEM), fill
    # A cut-out echo is the fill alone: not flagged.
    echo = extract_answer("Erin loved to play football. They tackled him. He stopped playing football with them.", PROBLEM)
    assert echo.status == "echo" and not repeats_passage(echo.answer, PROBLEM)
