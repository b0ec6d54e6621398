"""Fill live in headless Chromium with the embedded SmolLM2: an input error is said next to the inputs and
clears the outputs (no red badges, no traceback in the app's log), the status gives the prompt's token count
while the model reads it, a passage over the context window or the length limit is not read silently,
catalog models that cannot run here are marked in the model list, and a plugin study (the continuation example)
gets its own fields and answer in the same tab."""

from __future__ import annotations

import os
import re

import pytest
from browser_helpers import choose, open_tab, settle

from tests.waiting import PATIENCE_MS

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

SENTENCE = "The harbour town woke slowly while the fishermen mended their nets and gulls argued over the quay. "
RECORD_STATUSES = """() => {
    window.liveStatuses = [];
    const status = document.querySelector('#live-status');
    new MutationObserver(() => window.liveStatuses.push(status.innerText.trim()))
        .observe(status, {subtree: true, childList: true, characterData: true});
}"""
"""Keeps every text the status line shows: a state that lasts a moment is still seen."""
ERROR_BADGES = "#tab-live [data-testid='status-tracker'] .error"


def passage_of(chars: int, tag: str) -> str:
    """About `chars` characters of prose with one blank in the middle; `tag` keeps it out of the request cache."""
    half = SENTENCE * max(1, chars // len(SENTENCE) // 2)
    return f"Log {tag}. {half}______ {half}".strip()


def open_live(page) -> None:
    """The Fill live tab with SmolLM2 chosen, recording every text its status line shows from now on."""
    open_tab(page, "Fill live")
    choose(page, "live-model", "smollm2")
    page.evaluate(RECORD_STATUSES)


def fill(page, passage: str, max_tokens: int = 16) -> None:
    page.locator("#live-passage textarea").fill(passage)
    page.locator("#live-max-tokens input[type='number']").fill(str(max_tokens))
    page.locator("#live-max-tokens input[type='number']").blur()
    page.locator("#live-go").click()


def statuses(page) -> list[str]:
    return [s for s in page.evaluate("() => window.liveStatuses") if s]


def assert_not_read(page) -> None:
    seen = statuses(page)
    assert not any(s.startswith(("reading", "generating")) for s in seen), seen


def log_since(ui_paths, offset: int) -> str:
    with (ui_paths["reports"].parent / "app.log").open() as handle:
        handle.seek(offset)
        return handle.read()


def log_size(ui_paths) -> int:
    return (ui_paths["reports"].parent / "app.log").stat().st_size


def expect_cleared(page, shown: str, stale: str | None = None) -> None:
    """The outputs belong to the passage now in the box: no fill, no reply, no metrics, no red badges."""
    from playwright.sync_api import expect

    view = page.locator("#live-view")
    expect(view.locator("mark.live-fill")).to_have_count(0)
    expect(view).to_contain_text(shown)
    if stale:
        expect(view).not_to_contain_text(stale)
    expect(page.locator("#live-raw textarea")).to_have_value("")
    expect(page.locator("#live-metrics")).not_to_contain_text("AtAvg")
    expect(page.locator(ERROR_BADGES)).to_have_count(0)


def test_an_input_error_is_said_by_the_inputs_and_clears_the_outputs(page, ui_paths, screenshot):
    from playwright.sync_api import expect

    open_live(page)
    page.locator("#live-gold textarea").fill("He lit the lamp.")
    fill(page, passage_of(300, "errors"))
    expect(page.locator("#live-view mark.live-fill.done")).to_have_count(1)
    expect(page.locator("#live-metrics")).to_contain_text("AtAvg")
    screenshot(page, "fill-live-before-an-error")
    offset = log_size(ui_paths)
    message = page.locator("#live-passage-error")  # under the passage it is about
    mistakes = [
        ("no-blank", "A passage that lost its blank somewhere.", "has no blank"),
        ("two-blanks", "One ______ and another ______ here.", "has 2 blanks"),
        ("empty", "", "The passage is empty"),
    ]
    for name, passage, said in mistakes:
        fill(page, passage)
        expect(message).to_contain_text(said)
        expect_cleared(page, passage.split("______")[0], stale="Log errors.")
        screenshot(page, f"fill-live-error-{name}")
    settle(page)  # the events have ended: what the app printed while handling them is in its (unbuffered) log
    log = log_since(ui_paths, offset)
    assert "Traceback" not in log and "blank" not in log, log[-3000:]


def test_the_status_gives_the_prompt_token_count_while_the_model_reads_it(page, screenshot):
    from playwright.sync_api import expect

    open_live(page)
    passage = passage_of(5000, "reading")
    fill(page, passage)
    status = page.locator("#live-status")
    expect(status).to_contain_text("reading the prompt")
    screenshot(page, "fill-live-reading-the-prompt")
    expect(page.locator("#live-view mark.live-fill.done")).to_have_count(1, timeout=PATIENCE_MS)
    seen = statuses(page)
    reading = [s for s in seen if s.startswith("reading the prompt")]
    assert reading, seen
    tokens = int(re.search(r"reading the prompt \(([\d,]+) tokens\)", reading[0]).group(1).replace(",", ""))
    # Counted with SmolLM2's own tokenizer: English prose runs 4-5 characters a token.
    assert len(passage) / 6 < tokens < len(passage) / 3, (tokens, len(passage))
    assert not any(s.startswith("loading") for s in seen[seen.index(reading[0]):]), seen
    screenshot(page, "fill-live-read-and-filled")


def test_a_passage_over_the_context_window_is_refused_before_generating(page, ui_paths, screenshot):
    from playwright.sync_api import expect

    open_live(page)
    offset = log_size(ui_paths)
    fill(page, passage_of(20_000, "context"))
    expect(page.locator("#live-passage-error")).to_contain_text("context window of 4,096 tokens")
    expect_cleared(page, "Log context.")
    assert_not_read(page)
    screenshot(page, "fill-live-over-the-context-window")
    assert "Traceback" not in log_since(ui_paths, offset)


def test_a_long_passage_is_read_only_once_confirmed(page, screenshot):
    from playwright.sync_api import expect

    open_live(page)
    passage = passage_of(7000, "long")
    fill(page, passage)
    message = page.locator("#live-passage-error")
    expect(message).to_contain_text(f"{len(passage):,} characters, over the 6,000")
    expect(message).to_contain_text("again to fill it anyway")
    expect_cleared(page, "Log long.")
    assert_not_read(page)
    screenshot(page, "fill-live-long-passage-warning")
    page.locator("#live-go").click()  # the same passage again: go ahead
    expect(page.locator("#live-view mark.live-fill.done")).to_have_count(1, timeout=PATIENCE_MS)
    expect(message).to_have_text("")
    assert any(s.startswith("reading the prompt") for s in statuses(page)), statuses(page)
    screenshot(page, "fill-live-long-passage-filled")


def test_models_that_cannot_run_here_are_marked_and_refused_inline(page, ui_paths, screenshot):
    from playwright.sync_api import expect

    hosted = {"gpt-4.1-mini": "OPENAI_API_KEY", "gemini-flash-lite": "GEMINI_API_KEY", "claude-sonnet": "ANTHROPIC_API_KEY"}
    unset = {model: key for model, key in hosted.items() if not os.environ.get(key)}
    if not unset:
        pytest.skip("every hosted model's key is set here")
    open_tab(page, "Fill live")
    page.locator("#live-model input").first.click()
    options = [o.strip().lstrip("✓").strip() for o in page.get_by_role("option").all_inner_texts()]
    assert "smollm2" in options and "gemma3" in options, options
    for model, key in unset.items():
        assert f"{model} — needs {key}" in options, options
    assert "llama-3.1-8b — needs a download" in options, options
    assert options.index("gemma3") < options.index("llama-3.1-8b — needs a download")  # the ready ones first
    # The list fades in: the screenshot waits for its animations to finish.
    page.get_by_role("listbox").evaluate("list => Promise.all(list.getAnimations({subtree: true}).map(a => a.finished))")
    screenshot(page, "fill-live-model-marks")

    model, key = next(iter(unset.items()))
    offset = log_size(ui_paths)
    page.get_by_role("option", name=f"{model} — needs {key}").click()
    expect(page.locator("#live-model input").first).to_have_value(f"{model} — needs {key}")
    page.locator("#live-go").click()
    expect(page.locator("#live-model-error")).to_contain_text(f"{model} needs {key} to run from here")
    expect(page.locator("#live-passage-error")).to_have_text("")
    expect(page.locator(ERROR_BADGES)).to_have_count(0)
    screenshot(page, "fill-live-model-needs-a-key")
    settle(page)  # the event has ended: what the app printed while handling it is in its (unbuffered) log
    log = log_since(ui_paths, offset)
    assert "Traceback" not in log and key not in log, log[-3000:]


def test_fill_live_takes_a_plugin_studys_fields_and_shows_its_answer(page, screenshot):
    """Fill live reads the study picked: the continuation plugin's 'guided' setting asks for its two template slots
    and its reference, and the reply comes back with the answer the study's own step takes from it, after the opening
    and scored against the reference."""
    from playwright.sync_api import expect

    open_tab(page, "Fill live")
    choose(page, "live-study", "continuation")
    expect(page.locator("#live-passage")).to_be_hidden()  # the infilling study's form is put away
    expect(page.locator("#live-go")).to_have_text("Answer")
    choose(page, "live-setting", "plain — The opening alone")
    expect(page.locator("#live-domain")).to_be_hidden()  # 'plain' asks for the opening alone
    choose(page, "live-setting", "guided — The opening, its kind of text and what a good next sentence does")
    fields = [page.locator(f"#live-{name}") for name in ("domain", "opening", "next_sentence")]
    for field, label in zip(fields, ("Domain", "Opening", "Next sentence (optional)"), strict=True):
        expect(field).to_be_visible()
        expect(field).to_contain_text(label)
    choose(page, "live-model", "smollm2")
    page.locator("#live-max-tokens input[type='number']").fill("24")
    page.locator("#live-max-tokens input[type='number']").blur()
    page.locator("#live-go").click()
    expect(page.locator("#live-domain-error")).to_contain_text("Fill in the domain and the opening")
    fields[0].locator("textarea").fill("story")
    opening = "The ferry left the harbour at dawn. Gulls followed it past the lighthouse."
    fields[1].locator("textarea").fill(opening)
    fields[2].locator("textarea").fill("The captain counted the passengers twice.")
    page.locator("#live-go").click()
    expect(page.locator("#live-status")).to_contain_text("Continuation:")
    expect(page.locator("#live-metrics")).to_contain_text("AtAvg")
    reply = page.locator("#live-raw textarea").input_value()
    shown = page.locator("#live-status").inner_text().split("Continuation:", 1)[1].strip()
    assert reply.strip() and shown and shown in reply, (reply, shown)
    expect(page.locator("#live-view")).to_contain_text(opening)
    expect(page.locator("#live-view mark.live-fill.done")).to_have_text(shown)
    expect(page.locator("#live-domain-error")).to_have_text("")
    screenshot(page, "fill-live-continuation")
