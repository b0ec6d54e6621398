"""End-to-end: the Annotate tab rates the example continuation study's outputs (a plugin with no rating code) in a
sub-tab built from its declaration, in headless Chromium: the opening its judge sees and the continuation under the
study's labels, its rubric's three dimensions, the rate-next order from its judge's scores, a saved rating in the
store and on the generation's MLflow trace as human feedback, and the cell's interval and rating plan under the form.
The sweep is logged straight into MLflow (what
is tested is the form and what a rating becomes, not the models)."""

from __future__ import annotations

import os
import re

import mlflow
import numpy as np
import pandas as pd
import pytest
from browser_helpers import annotate_page, choose, open_tab

from narrative_eval import tracking
from narrative_eval.annotations import AnnotationStore
from narrative_eval.annotations.rate_next import judge_uncertainty, rate_next_plan, sweep_seed
from narrative_eval.studies.rating import item_context
from narrative_eval.study import load_study
from narrative_eval.tracking.store import TAG_KIND, TAG_SWEEP
from tests.servers import start_app, stop
from ui.annotate_common import INTERVAL_COLUMNS

pytestmark = [pytest.mark.browser, pytest.mark.server]

SWEEP = "ui-rate-continuations"
ITEMS = 6
DIMENSIONS = ("fluency", "coherence", "progression")


def judged(k: int) -> dict[str, float]:
    """Judge j's scores of continuation k: in agreement on some, far apart on others."""
    apart = k % 3
    return {"fluency": float(3 + (apart > 0)), "coherence": float(3 - apart), "progression": float(2 + apart)}


def log_sweep() -> list[str]:
    """One finished cell (m x plain) of six continuations of one seed, each with its trace, judged by j on the
    study's rubric; returns the traces' ids in row order."""
    experiment_name = load_study("continuation").experiment
    mlflow.set_tracking_uri(tracking.tracking_uri())
    tracking.end_run(tracking.start_sweep_run(experiment_name, SWEEP, {"sweep": SWEEP}))
    experiment = mlflow.set_experiment(experiment_name)
    rows, traces = [], []
    with mlflow.start_run(experiment_id=experiment.experiment_id, run_name="m-plain"):
        for k in range(ITEMS):
            with mlflow.start_span(name="generate") as span:
                span.set_inputs({"opening": f"Opening {k}."})
                span.set_outputs({"continuation": f"continuation number {k}"})
            traces.append(mlflow.get_last_active_trace_id())
            rows.append({"item_id": f"story/s{k}/3", "domain": "story",
                         "opening": f"The keeper of lighthouse {k} climbed the stairs at dusk.", "seed": 0,
                         "continuation": f"continuation number {k}", "next_sentence": "The true next sentence.",
                         "trace_id": traces[-1], "judge/j/status": "ok",
                         **{f"judge/j/{d}": v for d, v in judged(k).items()},
                         "judge/j/qavg": float(np.mean(list(judged(k).values())))})
        mlflow.set_tags({TAG_KIND: "cell", TAG_SWEEP: SWEEP})
        mlflow.log_params({"model_id": "m", "prompt_setting": "plain", "data_sha256": "0" * 64, "data_path": ""})
        mlflow.log_metrics({"n_seeds": 1.0, "n_items": float(ITEMS), "judge/j/failure_rate": 0.0,
                            "judge/j/qavg": float(np.mean([np.mean(list(judged(k).values())) for k in range(ITEMS)]))})
        mlflow.log_table(pd.DataFrame(rows), artifact_file="generations.json")
    return traces


@pytest.fixture(scope="module")
def continuation_app(tmp_path_factory):
    """The sweep in the session's store, and the app on it with a ratings file of its own."""
    root = tmp_path_factory.mktemp("rate-continuations")
    traces = log_sweep()
    process, url = start_app(["--reports-dir", str(root / "reports"), "--jobs-dir", str(root / "jobs"),
                              "--annotations", str(root / "annotations.sqlite")], root / "app.log", dict(os.environ))
    yield url, root / "annotations.sqlite", traces
    stop(process)


def test_a_continuation_is_rated_in_its_own_sub_tab_and_saved(continuation_app, browser, screenshot):
    from playwright.sync_api import expect

    url, ratings_path, traces = continuation_app
    page = annotate_page(browser, url, "ana")
    open_tab(page, "Continuations (continuation)")
    # Before any plan, the plan table shows its own columns under their labels (no placeholder headers); the
    # agreement has its pointwise table and no pairwise one: this sub-tab rates one continuation at a time.
    plan_table = page.locator("#annotate-continuation-plan-table")
    for header in ("Model", "Setting", "Dimension", "Rated", "Ratings needed (with the judge)", "Judge"):
        expect(plan_table.locator("th").filter(has_text=header).first).to_be_attached()
    assert not [text for text in plan_table.locator("th").all_inner_texts() if text.strip() in ("1", "2", "3")]
    page.locator("#annotate-continuation-agreement").get_by_text("Agreement with the judge").click()
    expect(page.locator("#annotate-continuation-agreement-pointwise")).to_have_count(1)
    expect(page.locator("#annotate-continuation-agreement-pairwise")).to_have_count(0)
    choose(page, "annotate-continuation-sweep", SWEEP)
    page.locator("#annotate-continuation-next").click()
    order = rate_next_plan([("m", "plain")] * ITEMS, [judge_uncertainty({"j": judged(k)}) for k in range(ITEMS)],
                           sweep_seed(SWEEP))["index"].tolist()
    first = order[0]
    item = page.locator("#annotate-continuation-item")
    # What the judge sees, under the study's labels, then the answer: never the true sentence, nor the model.
    expect(item).to_contain_text(f"continuation number {first}")
    expect(item).to_contain_text(f"The keeper of lighthouse {first} climbed the stairs at dusk.")
    expect(item).to_contain_text("Opening")
    expect(item).to_contain_text("Continuation")
    expect(item).not_to_contain_text("The true next sentence.")
    for label in ("Fluency", "Coherence with the opening", "Progression"):  # the rubric's dimensions, its labels
        expect(page.get_by_text(label, exact=True).first).to_be_visible()
    scores = {"fluency": 4, "coherence": 2, "progression": 3}
    for key, score in scores.items():
        page.locator(f"#annotate-continuation-{key}").get_by_text(str(score), exact=True).click()
    screenshot(page, "annotate-continuation-form")
    page.locator("#annotate-continuation-submit").click()
    expect(page.locator("#annotate-continuation-message")).to_contain_text("Saved")
    expect(page.locator("#annotate-continuation-progress")).to_contain_text(f"1 of {ITEMS}")
    rated_cell = page.locator("#annotate-continuation-intervals tbody tr").first.locator("td")
    expect(rated_cell.nth(INTERVAL_COLUMNS.index("n_rated"))).to_have_text("1")
    # The rest in the rate-next order, each following the saved one: the cell's interval appears.
    for position, k in enumerate(order[1:], start=2):
        expect(item).to_contain_text(f"continuation number {k}")
        for key in DIMENSIONS:
            page.locator(f"#annotate-continuation-{key}").get_by_text(str(1 + (k + position) % 5), exact=True).click()
        page.locator("#annotate-continuation-submit").click()
        expect(page.locator("#annotate-continuation-progress")).to_contain_text(f"{position} of {ITEMS}")
    expect(rated_cell.nth(INTERVAL_COLUMNS.index("n_rated"))).to_have_text(str(ITEMS))
    expect(rated_cell.nth(INTERVAL_COLUMNS.index("width"))).to_have_text(re.compile(r"^\s*\d+\.\d+\s*$"))
    expect(item).to_contain_text("No continuations left to rate")
    # The rating plan from the same ratings, a row per dimension of the study's rubric, under its labels.
    page.locator("#annotate-continuation-width input").fill("1.0")
    page.locator("#annotate-continuation-plan").click()
    for label in ("Fluency", "Coherence with the opening", "Progression"):
        expect(page.locator("#annotate-continuation-plan-table")).to_contain_text(label)
    # Agreement with the judge: its dimensions in the study's rubric's words (the infilling rubric's `coherence` is
    # "Bidirectional Coherence").
    page.locator("#annotate-continuation-few-compute").click()
    agreement = page.locator("#annotate-continuation-agreement-pointwise")
    expect(agreement).to_contain_text("Coherence with the opening")
    expect(agreement).not_to_contain_text("Bidirectional")
    screenshot(page, "annotate-continuation-rated")
    page.context.close()

    store = AnnotationStore(ratings_path)
    rating = store.ratings(rater="ana")[0]
    assert len(store.ratings(rater="ana")) == ITEMS
    rated = store.item(rating.item_id)
    assert rating.kind == "pointwise" and rating.scores == scores and rating.design["order"] == "rate-next"
    assert (rated.study, rated.sweep, rated.instance_id) == ("continuation", SWEEP, f"story/s{first}/3")
    assert item_context(rated) == {"opening": f"The keeper of lighthouse {first} climbed the stairs at dusk."}
    # The rating is human feedback on the generation's trace too, as a fill's is.
    client = mlflow.MlflowClient(tracking_uri=tracking.tracking_uri())
    feedback = {a.name: (a.source.source_type, a.source.source_id, a.feedback.value)
                for a in client.get_trace(traces[first]).info.assessments if a.name.startswith("human/")}
    assert feedback == {f"human/{key}": ("HUMAN", "ana", score) for key, score in scores.items()}
