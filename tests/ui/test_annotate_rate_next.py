"""End-to-end: the Annotate tab serves a sweep's fills in the rate-next order, keeps each rating's design, and shows
each cell's interval narrowing as ratings are saved, in headless Chromium (the sweep logged straight into MLflow: the
order and the intervals are what is tested, not the models)."""

from __future__ import annotations

import json
import os
import re

import mlflow
import numpy as np
import pandas as pd
import pytest
from browser_helpers import annotate_page, choose, settle

from narrative_eval import tracking
from narrative_eval.annotations import AnnotationStore
from narrative_eval.annotations.rate_next import cell_intervals, judge_uncertainty, rate_next_plan, sweep_seed
from narrative_eval.studies.infilling.vocabulary import NAME as EXPERIMENT
from narrative_eval.tracking.store import TAG_KIND, TAG_SWEEP
from tests.servers import start_app, stop
from ui.annotate_common import INTERVAL_COLUMNS

pytestmark = [pytest.mark.browser, pytest.mark.server]

SWEEP = "ui-rate-next"
PASSAGES = 24
DIMENSIONS = ("fluency", "faithfulness", "coherence", "consistency", "informativeness")


def judged(passage: int) -> dict[str, float]:
    """Judge j's five scores of passage k's fill: in agreement on some fills, far apart on others."""
    base = 1 + passage % 5
    apart = (passage * 7) % 3  # 0, 1 or 2 points between its highest and lowest dimension
    return {d: float(min(5, max(1, base + (apart if i % 2 else -apart) * (i > 0)))) for i, d in enumerate(DIMENSIONS)}


def log_sweep() -> None:
    """One finished cell (m x L2) of 24 fills of one seed, judged by j on the rubric's five dimensions."""
    mlflow.set_tracking_uri(tracking.tracking_uri())
    tracking.end_run(tracking.start_sweep_run(EXPERIMENT, SWEEP, {"sweep": SWEEP}))
    experiment = mlflow.set_experiment(EXPERIMENT)
    rows = []
    for passage in range(PASSAGES):
        messages = [{"role": "user", "content": f"Fill the blank of passage {passage}.\n\nThe story of passage "
                                                 f"{passage} begins here and ____ and it ends well, as stories do."}]
        rows.append({"instance_id": f"ds/ref{passage}/0/1", "seed": 0, "answer": f"fill number {passage}",
                     "gold": "gold", "messages": json.dumps(messages), "judge/j/status": "ok",
                     **{f"judge/j/{d}": v for d, v in judged(passage).items()},
                     "judge/j/qavg": float(np.mean(list(judged(passage).values())))})
    with mlflow.start_run(experiment_id=experiment.experiment_id, run_name="m-L2"):
        mlflow.set_tags({TAG_KIND: "cell", TAG_SWEEP: SWEEP})
        mlflow.log_params({"model_id": "m", "prompt_setting": "L2", "data_sha256": "0" * 64, "data_path": ""})
        mlflow.log_metrics({"n_seeds": 1.0, "n_instances": float(PASSAGES),
                            **{f"judge/j/{d}": float(np.mean([judged(p)[d] for p in range(PASSAGES)]))
                               for d in DIMENSIONS},
                            "judge/j/qavg": float(np.mean([list(judged(p).values()) for p in range(PASSAGES)]))})
        mlflow.log_table(pd.DataFrame(rows), artifact_file="generations.json")


@pytest.fixture(scope="module")
def rate_next_app(tmp_path_factory):
    """The sweep in the session's store, and the app on it with a ratings file of its own."""
    root = tmp_path_factory.mktemp("rate-next")
    log_sweep()
    process, url = start_app(["--reports-dir", str(root / "reports"), "--jobs-dir", str(root / "jobs"),
                              "--annotations", str(root / "annotations.sqlite")], root / "app.log", dict(os.environ))
    yield url, root / "annotations.sqlite"
    stop(process)


def expected_order() -> list[int]:
    """The passages in the order the tab must serve them: the library's plan over the same uncertainties."""
    uncertainty = [judge_uncertainty({"j": judged(p)}) for p in range(PASSAGES)]
    plan = rate_next_plan([("m", "L2")] * PASSAGES, uncertainty, sweep_seed(SWEEP))
    return plan["index"].tolist()


def shown(page, column: str):
    """The intervals table's first row's cell under `column` (the tab's INTERVAL_COLUMNS)."""
    return page.locator("#annotate-intervals tbody tr").first.locator("td").nth(INTERVAL_COLUMNS.index(column))


def test_fills_come_where_they_count_and_the_interval_narrows(rate_next_app, browser, screenshot):
    from playwright.sync_api import expect

    url, ratings_path = rate_next_app
    page = annotate_page(browser, url, "ana", {"width": 1400, "height": 1400})
    page.locator("#annotate-mode").get_by_text("pointwise", exact=True).click()
    choose(page, "annotate-sweep", SWEEP)
    order = expected_order()
    page.locator("#annotate-next").click()
    item = page.locator("#annotate-item")
    widths = {}
    for rated in range(12):
        passage = order[rated]
        expect(item).to_contain_text(f"fill number {passage}")  # the next fill of the rate-next order
        # People rate at the judge's mean, or a point above it on every other fill.
        score = int(min(5, max(1, round(np.mean(list(judged(passage).values()))) + rated % 2)))
        for key in DIMENSIONS:
            page.locator(f"#annotate-{key}").get_by_text(str(score), exact=True).click()
        page.locator("#annotate-submit").click()
        expect(page.locator("#annotate-progress")).to_contain_text(f"{rated + 1} of {PASSAGES}")
        expect(shown(page, "n_rated")).to_have_text(str(rated + 1))
        if rated + 1 in (6, 12):
            expect(shown(page, "width")).to_have_text(re.compile(r"^\s*\d+\.\d+\s*$"))  # re-rendered after each save
            screenshot(page, f"annotate-rate-next-{rated + 1}")
            widths[rated + 1] = float(shown(page, "width").text_content())
    # The interval of the cell narrows from 6 ratings (two in each stratum: its first interval) to 12, and is the
    # library's stratified estimate.
    assert widths[12] < widths[6], widths
    store = AnnotationStore(ratings_path)
    ratings = store.ratings(rater="ana")
    assert len(ratings) == 12 and all(r.design["order"] == "rate-next" for r in ratings)
    assert all(r.design["weight"] == pytest.approx(1 / r.design["probability"]) for r in ratings)
    human = np.full(PASSAGES, np.nan)
    for rating in ratings:
        passage = int(store.item(rating.item_id).instance_id.split("ref")[1].split("/")[0])
        human[passage] = np.mean(list(rating.scores.values()))
    uncertainty = [judge_uncertainty({"j": judged(p)}) for p in range(PASSAGES)]
    ((_, expected),) = cell_intervals([("m", "L2")] * PASSAGES, uncertainty,
                                      [np.mean(list(judged(p).values())) for p in range(PASSAGES)], human)
    assert widths[12] == pytest.approx(expected.estimate.hi - expected.estimate.lo, abs=1e-3)
    # The rating plan for a width of 1.0 on the 1-5 scale, per dimension.
    page.locator("#annotate-width input").fill("1.0")
    page.locator("#annotate-plan").click()
    settle(page)
    screenshot(page, "annotate-rating-plan")
    for label in ("Fluency", "Context Faithfulness", "Bidirectional Coherence", "Narrative Consistency",
                  "Informativeness"):  # a row per dimension of the rubric
        expect(page.locator("#annotate-plan-table")).to_contain_text(label)
    page.context.close()
