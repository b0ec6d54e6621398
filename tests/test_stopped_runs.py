"""Runs a stopped sweep leaves behind: ended, saying what they are, and never the sweep the app opens on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.sweep import expand_grid

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(autouse=True)
def no_run_left_open():
    """Each test starts with no run this process left open, so `end_open_runs` answers with the test's own runs only.
    A run another module left open in this pytest process would count here: which modules run before this one in a
    process changes with pytest-xdist's scheduling, and so with the machine's load."""
    tracking.end_open_runs("KILLED")
    yield


def cells_of(sweep: str):
    config = load_config(REPO / "experiments" / "configs" / "quickstart.yaml", [f"sweep={sweep}", "judges=[]"])
    return expand_grid(config)


def test_a_cell_run_says_what_it_is_from_its_start_and_ends_killed_when_stopped():
    """Bug 4: a stopped cell run stayed RUNNING with empty model/setting/condition (params came only at the end)."""
    cell = cells_of("stopped-early")[0]
    parent = tracking.start_sweep_run("infilling", "stopped-early", {})
    run_id = tracking.start_cell_run("infilling", cell, parent)
    params = tracking.client().get_run(run_id).data.params
    assert (params["model_id"], params["prompt_setting"], params["condition"]) == (
        cell.model.id, cell.prompt_setting, cell.condition)
    assert set(tracking.end_open_runs("KILLED")) == {run_id, parent}
    assert tracking.client().get_run(run_id).info.status == "KILLED"
    assert tracking.client().get_run(parent).info.status == "KILLED"
    assert tracking.end_open_runs("KILLED") == []


def test_a_cell_run_handed_to_the_driver_is_ended_by_the_driver_when_it_stops():
    """A Ray worker hands its finished cell's run to the driver's writer: a driver stopped before writing it ends it
    KILLED (a rerun redoes it), the worker no longer does, and the run stays known as fresh (no earlier traces)."""
    cell = cells_of("handed-over")[0]
    parent = tracking.start_sweep_run("infilling", "handed-over", {})
    run_id = tracking.start_cell_run("infilling", cell, parent)
    assert tracking.hand_over(run_id) is True  # the worker's side: created there, so it holds no traces
    assert tracking.end_open_runs("KILLED") == [parent]
    assert tracking.client().get_run(run_id).info.status == "RUNNING"
    tracking.take_over(run_id, fresh=True)  # the driver's side
    assert tracking.end_open_runs("KILLED") == [run_id]
    assert tracking.client().get_run(run_id).info.status == "KILLED"


def test_tabs_open_on_the_newest_sweep_with_a_finished_cell():
    """Bug 4: the tabs opened on the newest sweep, even one stopped before any cell finished."""
    from ui.common import pick_sweep

    done = cells_of("finished-first")[0]
    parent = tracking.start_sweep_run("infilling", "finished-first", {})
    tracking.end_run(tracking.start_cell_run("infilling", done, parent), "FINISHED")
    tracking.end_run(parent, "FINISHED")
    dead = cells_of("stopped-later")[0]
    parent = tracking.start_sweep_run("infilling", "stopped-later", {})
    tracking.start_cell_run("infilling", dead, parent)
    tracking.end_open_runs("KILLED")
    names, shown = pick_sweep("infilling")
    assert names.index("stopped-later") < names.index("finished-first")  # newest first in the list
    assert shown != "stopped-later" and shown in tracking.finished_sweeps("infilling")
    assert pick_sweep("infilling", "stopped-later") == (names, "stopped-later")  # a chosen sweep stays chosen


def test_a_stop_between_creating_a_run_and_logging_its_params_still_ends_it_with_them(monkeypatch):
    """A SIGTERM that landed right after the run was created (seen in CI) left it RUNNING, without params."""
    from experiments.progress import Stopped
    from mlflow import MlflowClient

    cell = cells_of("stopped-at-birth")[0]
    parent = tracking.start_sweep_run("infilling", "stopped-at-birth", {})
    real_log_batch = MlflowClient.log_batch

    def stop_instead(self, run_id, *args, **kwargs):
        raise Stopped()

    monkeypatch.setattr(MlflowClient, "log_batch", stop_instead)
    try:
        tracking.start_cell_run("infilling", cell, parent)
    except Stopped:
        pass
    else:
        raise AssertionError("the stop did not reach start_cell_run")
    monkeypatch.setattr(MlflowClient, "log_batch", real_log_batch)
    ended = tracking.end_open_runs("KILLED")
    runs = tracking.sweep_cell_runs("infilling", "stopped-at-birth", finished_only=False)
    assert list(runs["status"]) == ["KILLED"] and set(ended) == {runs["run_id"].iloc[0], parent}
    assert runs["params.model_id"].iloc[0] == cell.model.id and runs["params.prompt_setting"].iloc[0] == cell.prompt_setting


def test_a_logged_cell_spec_keeps_its_token_counts_and_loses_its_secrets():
    """max_new_tokens was logged as '<redacted>' (it contains 'token'), so cell_spec.json could not be rerun."""
    from narrative_eval.records import CellSpec

    cell = cells_of("redaction")[0]
    logged = tracking.redact(cell.model_dump(mode="json"))
    assert CellSpec(**logged) == cell
    secrets = tracking.redact({"api_key": "x", "access_token": "x", "Authorization": "x", "key_env": "OPENAI_API_KEY",
                               "options": {"password": "x", "prompt_tokens": 5}})
    assert secrets == {"api_key": "<redacted>", "access_token": "<redacted>", "Authorization": "<redacted>",
                       "key_env": "OPENAI_API_KEY", "options": {"password": "<redacted>", "prompt_tokens": 5}}
