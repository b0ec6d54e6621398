"""The error policy as a new user meets it: every bad input gives `error:` lines, exit 2 and no traceback.

Commands that must leave a store untouched, and the report and app commands, run as processes, as a user starts
them; the sweep command's other bad inputs run in this process through the same entry point (`cli_main(main)`, all
that `python -m experiments.sweep` adds is the exit), two seconds of imports saved on each."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.sweep import main as sweep_main
from narrative_eval.data.instances import COLUMNS
from narrative_eval.errors import DEBUG_ENV, cli_main

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "experiments" / "configs" / "quickstart.yaml"
SAMPLE = REPO / "data" / "infilling" / "sample.jsonl"


def start(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a project command as a user would, from cwd, with the repo's packages importable."""
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    environment.pop("NARRATIVE_EVAL_DEBUG", None)
    environment.update(env or {})
    return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, timeout: int = 600) -> subprocess.CompletedProcess:
    out, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def command(*args: str, timeout: int = 600, **kwargs) -> subprocess.CompletedProcess:
    return finish(start(*args, **kwargs), timeout)


def run_all(commands: dict[str, tuple]) -> dict[str, subprocess.CompletedProcess]:
    """Run several commands at once (each spends seconds importing), results by name."""
    started = {name: start(*args) for name, args in commands.items()}
    return {name: finish(process) for name, process in started.items()}


def run_sweep_command(*args: str) -> subprocess.CompletedProcess:
    """The sweep command (args after `-m experiments.sweep`) run in this process: its exit status and output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli_main(sweep_main, list(args))
        except SystemExit as exit_:  # argparse's own usage errors
            status = exit_.code
    return subprocess.CompletedProcess(["experiments.sweep", *args], status, out.getvalue(), err.getvalue())


def run_sweep_commands(commands: dict[str, tuple]) -> dict[str, subprocess.CompletedProcess]:
    """Several sweep commands (as for run_all, each starting with the module name) run in this process, by name."""
    return {name: run_sweep_command(*args[1:]) for name, args in commands.items()}


def errors_of(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def assert_user_error(result, *expected: str) -> list[str]:
    """Exit 2, no traceback, and each expected fragment in some `error:` line."""
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = errors_of(result)
    assert lines, result.stderr
    for fragment in expected:
        assert any(fragment in line for line in lines), (fragment, lines)
    return lines


def good_rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()[:3]]


def write_csv(path: Path, rows: list[dict], header: list[str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad-inputs")
    rows = good_rows()
    broken = [dict(rows[0], n="7"), rows[1], dict(rows[2], problem="no blank here", gold_answer="")]
    utf16 = root / "utf16.csv"
    write_csv(root / "plain.csv", rows, list(COLUMNS))
    utf16.write_bytes((root / "plain.csv").read_text(encoding="utf-8").encode("utf-16"))
    return {
        "bad_rows": write_csv(root / "bad_rows.csv", broken, list(COLUMNS)),
        "wrong_columns": write_csv(root / "wrong_columns.csv", rows, [c for c in COLUMNS if c != "gold_answer"] + ["answer"]),
        "binary": _write(root / "binary.csv", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
        "utf16": utf16,
        "root": root,
    }


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


SWEEP = ("experiments.sweep", "--no-progress")
DRY = (*SWEEP, "--config", str(QUICKSTART), "--dry-run")


def sweep(*args: str, **kwargs):
    return command(*SWEEP, *args, **kwargs)


@pytest.fixture
def no_debug(monkeypatch):
    """In-process commands see no debug request from the environment the tests run in."""
    monkeypatch.delenv(DEBUG_ENV, raising=False)


def test_every_bad_input_is_a_clean_user_error(bad_inputs, tmp_path, no_debug):
    """The issue's list: bad rows, wrong columns, binary, missing file, unknown model and key: exit 2, `error:` lines."""
    unknown_key = tmp_path / "typo.yaml"
    unknown_key.write_text(QUICKSTART.read_text() + "seed: [1]\nmax_tokens: 3\n")
    results = run_sweep_commands({
        "bad_rows": (*DRY, "--data", str(bad_inputs["bad_rows"])),
        "wrong_columns": (*DRY, "--data", str(bad_inputs["wrong_columns"])),
        "binary": (*DRY, "--data", str(bad_inputs["binary"])),
        "missing_data": (*DRY, "--data", str(tmp_path / "nowhere.csv")),
        "missing_config": (*SWEEP, "--config", str(tmp_path / "nowhere.yaml")),
        "unknown_model": (*DRY, "--set", "models=[smollm2,no-such-model,gpt-99]"),
        "unknown_key": (*SWEEP, "--config", str(unknown_key), "--dry-run"),
    })
    lines = assert_user_error(results["bad_rows"], "bad_rows.csv:2: n must be an integer from 1 to 3",
                              "bad_rows.csv:4: problem has no blank")
    assert any("bad_rows.csv:4: empty gold_answer" in line for line in lines), "every problem, not just the first"
    assert_user_error(results["wrong_columns"], "wrong_columns.csv:1: missing column(s): gold_answer")
    assert_user_error(results["binary"], "binary.csv:1:", "UTF-8")
    assert_user_error(results["missing_data"], "nowhere.csv: data file not found")
    assert_user_error(results["missing_config"], "nowhere.yaml: config file not found")
    lines = assert_user_error(results["unknown_model"], "'no-such-model' is not in the model catalog",
                              "'gpt-99' is not in the model catalog")
    assert all("--set models=" in line for line in lines)
    lines = assert_user_error(results["unknown_key"], "unknown key 'seed' (did you mean 'seeds'?)")
    typo_line = len(QUICKSTART.read_text().splitlines()) + 1  # the first line after the quickstart's own
    assert any(line.startswith(f"error: {unknown_key}:{typo_line}: unknown key 'seed'") for line in lines), lines
    assert any("unknown key 'max_tokens'" in line for line in lines)
    assert not any("pydantic" in line or "http" in line for line in lines)


def runs_in_store(tracking_uri: str) -> int:
    """How many MLflow runs (any experiment, any status) a tracking store holds."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return len(client.search_runs(experiments)) if experiments else 0


def test_inputs_that_would_run_nothing_are_user_errors_and_nothing_runs(tmp_path, no_debug):
    """A header-only data file, an empty task set, `seeds: []` and `--limit 0` used to finish a sweep on nothing (or
    run nothing without a word), and `seeds: [-1]` was taken: each is now one `error:` line, exit 2, no run."""
    header_only = write_csv(tmp_path / "header_only.csv", [], list(COLUMNS))
    empty_jsonl = _write(tmp_path / "empty.jsonl", b"")
    tasks, constraints = _write(tmp_path / "tasks.json", b"[]\n"), _write(tmp_path / "constraints.jsonl", b"")
    incremental = REPO / "experiments" / "configs" / "incremental_embedded.yaml"
    # Not dry runs, so processes with a store of their own: they would start MLflow runs and write a report if the
    # checks came too late. The dry runs write nothing and run in this process.
    real = (*SWEEP, "--config", str(QUICKSTART), "--set", "sweep=must-not-run", "--set", f"report_dir={tmp_path}/{{sweep}}")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    started = {name: start(*args, env={"MLFLOW_TRACKING_URI": store}) for name, args in {
        "header_only": (*real, "--data", str(header_only)),
        "no_seeds": (*real, "--set", "seeds=[]"),
    }.items()}
    results = run_sweep_commands({
        "empty_jsonl": (*DRY, "--data", str(empty_jsonl)),
        "empty_tasks": (*SWEEP, "--config", str(incremental), "--dry-run", "--data", str(tasks),
                        "--set", f"constraints={constraints}"),
        "limit_zero": (*DRY, "--limit", "0"),
        "random_seed": (*DRY, "--set", "seeds=[0,-1]"),
    })
    results.update({name: finish(process) for name, process in started.items()})
    assert assert_user_error(results["header_only"]) == [
        f"error: {header_only}: no instances: the file has its header and no rows"]
    assert assert_user_error(results["no_seeds"]) == [
        "error: --set seeds=[]: seeds: a cell needs at least one seed (e.g. seeds: [0])"]
    assert assert_user_error(results["empty_jsonl"]) == [
        f"error: {empty_jsonl}: no instances: the file has no records (one JSON object per line)"]
    assert assert_user_error(results["empty_tasks"]) == [
        f"error: {tasks}: no tasks: the JSON array is empty",
        f"error: {constraints}: no checklists: the file has no records (one JSON object per line)"]
    assert assert_user_error(results["limit_zero"]) == [
        "error: --limit 0: limit: must be a positive integer (how many instances or tasks to keep), got 0"]
    assert_user_error(results["random_seed"], "--set seeds=[0,-1]: seeds: must be integers from 0 to 4294967294",
                      "as 'a random seed'", "got -1")
    assert all("cells" not in result.stdout for result in results.values())  # not even the dry run's grid
    assert runs_in_store(store) == 0
    assert not (tmp_path / "must-not-run").exists()


def test_utf16_data_is_read_and_debug_shows_the_traceback(bad_inputs, no_debug, monkeypatch):
    """UTF-16 with a byte-order mark is decoded; --debug / NARRATIVE_EVAL_DEBUG=1 show where a user error came from."""
    results = run_sweep_commands({
        "utf16": (*DRY, "--data", str(bad_inputs["utf16"])),
        "debug": (*DRY, "--debug", "--data", str(bad_inputs["bad_rows"])),
    })
    monkeypatch.setenv(DEBUG_ENV, "1")
    by_env = run_sweep_command(*DRY[1:], "--data", str(bad_inputs["binary"]))
    assert results["utf16"].returncode == 0, results["utf16"].stderr[-3000:]
    assert "generations: 18" in results["utf16"].stdout  # 3 instances x 2 models x 3 levels
    debug = results["debug"]
    assert debug.returncode == 2 and "Traceback" in debug.stderr and errors_of(debug)
    assert by_env.returncode == 2 and "Traceback" in by_env.stderr


def test_report_and_app_commands_follow_the_same_policy(bad_inputs, tmp_path):
    results = run_all({
        "scores": ("experiments.report", "creative-integrity", "--scores", str(bad_inputs["binary"]),
                   "--out", str(tmp_path / "out")),
        "sweep": ("experiments.report", "infilling", "--sweep", "never-ran", "--out", str(tmp_path / "o")),
        "ui": ("ui", "--auth", "nopassword", "--port", "1"),
    })
    assert_user_error(results["scores"], "binary.csv:1:", "UTF-8")
    assert_user_error(results["sweep"], "no sweep named 'never-ran'")
    assert_user_error(results["ui"], "--auth (or NARRATIVE_EVAL_UI_AUTH) expects USER:PASS")


@pytest.mark.slow
def test_config_outside_the_repo_names_catalog_models_and_runs(tmp_path):
    """A config in /tmp naming `smollm2` finds the repository's catalog, runs, and exits 0 (run from /tmp too)."""
    config = tmp_path / "mine.yaml"
    config.write_text(f"""study: infilling
sweep: outside-config
data: {SAMPLE}
limit: 1
models: [smollm2]
prompt_settings: [L0]
generation: {{max_new_tokens: 12}}
metrics: [rouge1]
report_dir: {tmp_path / 'report'}
""")  # finding the catalog is tested, not the metrics: the cheapest one
    result = sweep("--config", str(config), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "cells: 1 finished" in result.stdout
