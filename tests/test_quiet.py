"""The known harmless warnings of dependencies are silenced, and only they: a new warning still shows."""

from __future__ import annotations

import logging
import sys
import warnings

import pytest

from narrative_eval.quiet import KNOWN_LOG_LINES, KNOWN_WARNINGS, no_weight_loading_bar, quiet_dependencies

MLFLOW_DATASET_HINTS = ("The specified dataset source can be interpreted", "Hint: Inferred schema contains integer")
PANDAS_4_NOTICE = "Starting with pandas version 4.0 all arguments"
"""Raised inside MLflow's dataset digest under pandas 3."""


@pytest.fixture
def shown_warnings(monkeypatch):
    """Every warning raised inside the test, recorded under Python's plain rules plus whatever the test installs."""
    monkeypatch.setattr(sys, "warnoptions", [])  # as a command started without -W sees it
    loggers = {line.logger: list(logging.getLogger(line.logger).filters) for line in KNOWN_LOG_LINES}
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        yield shown
    for name, filters in loggers.items():
        logging.getLogger(name).filters[:] = filters


def log_a_dataset_input(tmp_path):
    """What a cell does with its instances (narrative_eval.tracing): an MLflow dataset from a local file."""
    import mlflow.data
    import pandas as pd

    dataset = mlflow.data.from_pandas(pd.DataFrame({"instance_id": ["a", "b"], "n": [1, 3]}),
                                      source=str(tmp_path / "data.jsonl"))
    dataset._to_mlflow_entity()  # the schema is inferred here


def messages(shown) -> list[str]:
    return [str(w.message) for w in shown]


def test_mlflow_dataset_hints_are_silenced_and_were_real(shown_warnings, tmp_path):
    log_a_dataset_input(tmp_path)
    raised = messages(shown_warnings)
    assert all(any(m.startswith(known) for m in raised) for known in MLFLOW_DATASET_HINTS), raised

    shown_warnings.clear()
    quiet_dependencies()
    log_a_dataset_input(tmp_path)
    assert not [m for m in messages(shown_warnings) if m.startswith((*MLFLOW_DATASET_HINTS, PANDAS_4_NOTICE))]


def test_new_warnings_still_show(shown_warnings):
    quiet_dependencies()
    warnings.warn("a behaviour nobody has looked at yet", UserWarning)
    warnings.warn("a project function that is going away", DeprecationWarning)
    # A known message raised from somewhere else than the dependency it is known from is news too.
    warnings.warn("The specified dataset source can be interpreted in multiple ways: ours", UserWarning)
    assert messages(shown_warnings) == [
        "a behaviour nobody has looked at yet",
        "a project function that is going away",
        "The specified dataset source can be interpreted in multiple ways: ours",
    ]


def test_only_the_known_log_lines_are_dropped(shown_warnings, caplog):
    quiet_dependencies()
    torchao = logging.getLogger("torchao")
    with caplog.at_level(logging.WARNING):
        torchao.warning("Failed to load /venv/site-packages/torchao/_C_mxfp8.so: Could not load this library")
        torchao.warning("Failed to quantize layer 3")
    assert [record.getMessage() for record in caplog.records] == ["Failed to quantize layer 3"]


def test_pytest_filters_the_same_warnings(request):
    configured = request.config.getini("filterwarnings")
    for known in KNOWN_WARNINGS:
        assert known.pytest_filter() in configured
        assert known.pytest_filter().count(":") == 3, "pytest splits a filter on ':'; the message must have none"


def test_the_weight_loading_bar_comes_back_after_a_metric_model():
    from transformers.utils import logging as transformers_logging

    before = transformers_logging.is_progress_bar_enabled()
    with no_weight_loading_bar():
        assert not transformers_logging.is_progress_bar_enabled()
    assert transformers_logging.is_progress_bar_enabled() == before


def test_printed_known_warnings_and_log_lines_are_recognised_and_only_they():
    """Output of a child process that did not filter them (the app's job log): the same list decides."""
    from narrative_eval.quiet import known_output

    assert known_output("/venv/mlflow/data/dataset_source_registry.py:146: UserWarning: The specified dataset source "
                        "can be interpreted in multiple ways: LocalArtifactDatasetSource")
    assert known_output("WARNING torchao: Failed to load /venv/torchao/_C.so: undefined symbol")
    assert not known_output("/venv/mlflow/data/x.py:1: UserWarning: something new")
    assert not known_output("/venv/mlflow/data/x.py:1: DeprecationWarning: The specified dataset source can be")
    assert not known_output("WARNING narrative_eval.cells: cell smollm2/L2 retried once")
    assert not known_output("cells: 6 finished, 0 already done (skipped), 0 failed")


def test_mlflow_draws_no_artifact_download_bar(tmp_path, monkeypatch, capfd):
    """MLflow's 'Downloading artifacts' bar (416 lines in 25 minutes of the app's log, and in a sweep's output even with
    --no-progress) is off in every command, as the environment switch its child processes inherit."""
    import mlflow

    from narrative_eval import tracking

    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "true")  # so the test's end restores what was there
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    (tmp_path / "table.json").write_text("{}")
    run_id = tracking.start_sweep_run("quiet-bars", "bars", {})
    tracking.client().log_artifact(run_id, str(tmp_path / "table.json"))
    tracking.end_run(run_id)  # not left open for a later test's end_open_runs in this process

    def download() -> str:
        capfd.readouterr()
        mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="table.json", dst_path=str(tmp_path / "out"))
        return capfd.readouterr().err

    assert "Downloading artifacts" in download()  # the bar was real
    quiet_dependencies()
    assert "Downloading artifacts" not in download()
