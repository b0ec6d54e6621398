"""MLflow's own UI shows what a sweep's models wrote: a cell run's traces (prompt, reply, gold and every score),
two evaluation runs compared per instance, the sweep's inputs on the Datasets page and its prompts on the
Prompts page. `mlflow ui` is started by the test on 127.0.0.1 over the sweep's store
and stopped by PID; screenshots go to tests/ui/screenshots/."""

from __future__ import annotations

import pytest
from browser_helpers import BROWSER_PATIENCE_MS, VIEWPORT

from narrative_eval.tracing.datasets import SWEEPS_TAG

from tests.servers import start_mlflow, stop

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

@pytest.fixture(scope="module")
def mlflow_ui(app_env, e2e_sweep, ui_paths):
    log = ui_paths["reports"].parent / "mlflow-ui.log"
    process, url = start_mlflow(["--backend-store-uri", app_env["MLFLOW_TRACKING_URI"]], log, app_env, command="ui")
    try:
        yield url
    finally:
        stop(process)


@pytest.fixture()
def mlflow_page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(BROWSER_PATIENCE_MS)
    yield page
    context.close()


def _cells(app_env, sweep: str) -> tuple[str, list]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=app_env["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("infilling").experiment_id
    runs = client.search_runs([experiment], f"tags.`narrative_eval.sweep` = '{sweep}' and tags.`narrative_eval.kind` = 'cell'")
    return experiment, sorted(runs, key=lambda r: r.data.params["model_id"])


def _dismiss_tips(page) -> None:
    """MLflow opens a tip bubble on first visit; it would cover the table in the screenshot."""
    for label in ("Got it",):
        button = page.get_by_role("button", name=label)
        if button.count():
            button.first.click()


def test_a_cells_traces_in_mlflow_ui(mlflow_page, mlflow_ui, app_env, e2e_sweep, screenshot):
    experiment, cells = _cells(app_env, e2e_sweep)
    run = cells[0]
    passage = _first_passage(app_env, run.info.run_id)
    mlflow_page.goto(f"{mlflow_ui}/#/experiments/{experiment}/runs/{run.info.run_id}/traces")
    try:
        mlflow_page.get_by_text(passage[:40]).first.wait_for()
        # The assessment columns come after the rows: gold (an expectation) and the metrics (feedback from
        # code), each with its average over the cell's traces; the first few are shown until more are picked.
        mlflow_page.wait_for_function("() => document.body.innerText.includes('bertscore')")
    finally:
        screenshot(mlflow_page, "mlflow-cell-traces")
    body = mlflow_page.inner_text("body")
    for name in ("gold", "bertscore", "chrf", "Expectations", "Assessments"):
        assert name in body, name
    _dismiss_tips(mlflow_page)
    screenshot(mlflow_page, "mlflow-cell-traces")


def test_two_evaluation_runs_compared_in_mlflow_ui(mlflow_page, mlflow_ui, app_env, e2e_sweep, screenshot):
    experiment, cells = _cells(app_env, e2e_sweep)
    assert [r.data.params["model_id"] for r in cells] == ["gemma3", "smollm2"]
    first, second = (r.info.run_id for r in cells)
    mlflow_page.goto(f"{mlflow_ui}/#/experiments/{experiment}/evaluation-runs"
                     f"?selectedRunUuid={first}&compareToRunUuid={second}")
    mlflow_page.get_by_text("Comparing").first.wait_for()
    mlflow_page.get_by_text(_first_passage(app_env, first)[:40]).first.wait_for()
    body = mlflow_page.inner_text("body")
    assert "gemma3/L2" in body and "smollm2/L2" in body
    _dismiss_tips(mlflow_page)
    screenshot(mlflow_page, "mlflow-evaluation-runs-compared")


def test_datasets_and_prompts_pages_show_the_sweeps_inputs_and_prompts(mlflow_page, mlflow_ui, app_env, e2e_sweep,
                                                                       screenshot):
    import mlflow

    experiment, cells = _cells(app_env, e2e_sweep)
    client = mlflow.MlflowClient(tracking_uri=app_env["MLFLOW_TRACKING_URI"])
    # The experiment may hold other sweeps' datasets too (the Launch tests' sweeps share the store).
    found = [client.get_dataset(d.dataset_id) for d in client.search_datasets(experiment_ids=[experiment])]
    (dataset,) = [d for d in found if e2e_sweep in (d.tags or {}).get(SWEEPS_TAG, "").split(",")]
    mlflow_page.goto(f"{mlflow_ui}/#/experiments/{experiment}/datasets")
    try:
        mlflow_page.get_by_text(dataset.name).first.wait_for()
    finally:
        _dismiss_tips(mlflow_page)
        screenshot(mlflow_page, "mlflow-datasets")
    mlflow_page.goto(f"{mlflow_ui}/#/experiments/{experiment}/prompts")
    try:
        for name in ("infilling.L2", "rubric.infilling_narrative"):
            mlflow_page.get_by_text(name).first.wait_for()
    finally:
        _dismiss_tips(mlflow_page)
        screenshot(mlflow_page, "mlflow-prompts")


def _first_passage(app_env, run_id: str) -> str:
    """The start of the input of one of the run's traces, as MLflow's trace list shows it."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=app_env["MLFLOW_TRACKING_URI"])
    experiment = client.get_run(run_id).info.experiment_id
    traces = client.search_traces(locations=[experiment], run_id=run_id, include_spans=False)
    assert traces, "the cell has no traces"
    return traces[0].info.request_preview.strip()
