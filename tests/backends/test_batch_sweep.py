"""Judged sweeps with a hosted judge in batch mode, against the local server's batch endpoints.

The generator is the embedded SmolLM2 (llama.cpp); the judge is the `openai` backend through the real
SDK, answered by the local server (real SmolLM2 judgments) synchronously or through its Batch API.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from narrative_eval import tracking
from narrative_eval.backends.cache import RequestCache
from narrative_eval.config import load_config
from narrative_eval.errors import cli_main
from narrative_eval.sweep import run_sweep
from tests.waiting import wait_until

pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[2]
KEY = "test-key-123"
PRICES = {"input_per_mtok": 0.40, "output_per_mtok": 1.60}


@pytest.fixture
def server(api_server, monkeypatch):
    api_server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    yield api_server
    api_server.batches.hold = False
    api_server.reset()


def sweep_name(folder: Path, name: str) -> str:
    """The sweep a config written by write_config runs."""
    return f"{name}-{folder.name}"


def write_config(folder: Path, name: str, server, *, batch: bool, extra: str = "") -> Path:
    """A two-instance infilling sweep judged by a hosted judge; its own cache and report folder; no control checks,
    so every request counted is a cell's."""
    options = {"base_url": server.openai_base_url, "prices": PRICES, "retry_base_delay": 0.05, "batch": batch,
               "batch_poll_interval": 0.05, "batch_poll_max_interval": 0.2}
    path = folder / f"{name}.yaml"
    path.write_text(f"""
study: infilling
sweep: {sweep_name(folder, name)}
data: {REPO / 'data/infilling/sample.jsonl'}
limit: 2
models: [smollm2]
prompt_settings: [L2]
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: 24}}
metrics: {{names: [rouge1, chrf]}}
judges:
  - id: api-judge
    max_new_tokens: 384
    max_retries: 0
    model: {{id: api-judge, backend: openai, weights: gpt-judge-test, options: {json.dumps(options)}}}
cache: {folder / name}.sqlite
report_dir: {folder / 'report' / name}
judge_checks: false
{extra}
""")
    return path


def cached_replies(path: str) -> dict[str, tuple]:
    """Every cached reply's text and token counts by request key, read from the cache file."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT key, reply FROM replies").fetchall()
    return {key: (r["text"], r["prompt_tokens"], r["completion_tokens"]) for key, r in ((k, json.loads(v)) for k, v in rows)}


def cell_metrics(outcome) -> dict[str, float]:
    [cell] = outcome.cells
    return tracking.client().get_run(cell.run_id).data.metrics


def test_batch_sweep_gives_the_synchronous_replies_and_metrics(server, tmp_path, repo_root):
    catalog = repo_root / "experiments/configs/models.yaml"
    batched = run_sweep(load_config(write_config(tmp_path, "batched", server, batch=True), catalog=catalog))
    assert server.batches.submissions == 1
    synchronous = run_sweep(load_config(write_config(tmp_path, "sync", server, batch=False), catalog=catalog))
    assert server.batches.submissions == 1

    batch_cache, sync_cache = cached_replies(f"{tmp_path}/batched.sqlite"), cached_replies(f"{tmp_path}/sync.sqlite")
    assert len(batch_cache) == 4 and batch_cache == sync_cache  # 2 generations + 2 judgments, same keys and replies
    with_batch, without = cell_metrics(batched), cell_metrics(synchronous)
    scored = [k for k in without if k.startswith("judge/api-judge/") or k in ("rouge1", "chrf", "qavg")]
    assert "judge/api-judge/qavg" in scored
    assert {k: with_batch[k] for k in scored} == {k: without[k] for k in scored}
    # Costs: the same tokens, paid at the batch price in one run and the list price in the other.
    assert with_batch["cost/requests_batch"] == 2 and without["cost/requests_batch"] == 0
    assert with_batch["cost/batches_submitted"] == 1 and with_batch["cost/batch_requeued"] == 0
    assert with_batch["cost/usd_sync"] == without["cost/usd_sync"] > 0
    assert with_batch["cost/usd_paid"] == pytest.approx(with_batch["cost/usd_sync"] / 2)
    assert without["cost/usd_paid"] == pytest.approx(without["cost/usd_sync"])
    assert (batched.report_dir / "cost.csv").is_file() and any(t.startswith("Cost") for t in batched.tables)
    counts = pd.read_csv(batched.report_dir / "cost.csv")[["tokens_in", "tokens_out", "requests_sync", "requests_batch"]]
    assert all(kind == "i" for kind in counts.dtypes.map(lambda dtype: dtype.kind))  # counts, not 4.297e+04


def _batch_tagged(sweep: str) -> bool:
    """Whether a cell run of the sweep carries a submitted batch's tag."""
    runs = tracking.sweep_cell_runs("infilling", sweep, finished_only=False)
    return any(column.startswith("tags.narrative_eval.batch.") and runs[column].notna().any() for column in runs.columns)


def test_a_sweep_killed_while_its_batch_runs_resumes_that_batch(server, tmp_path, repo_root, capsys):
    path = write_config(tmp_path, "killed", server, batch=True)
    cache_path = tmp_path / "killed.sqlite"
    server.batches.hold = True
    sweep = subprocess.Popen([sys.executable, "-m", "experiments.sweep", "--config", str(path), "--no-progress",
                              "--catalog", str(repo_root / "experiments/configs/models.yaml")],
                             cwd=REPO, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Killed once the batch is in the cache and on the cell run: the sweep records it in that order, and a kill
        # between the two would leave the resumed run untagged (the tag shows the same run resumed).
        def submitted_and_tagged() -> bool:
            assert sweep.poll() is None, sweep.stderr.read().decode()[-2000:]
            return bool(cache_path.exists() and RequestCache(cache_path).open_batches()
                        and _batch_tagged(sweep_name(tmp_path, "killed")))

        wait_until(submitted_and_tagged, "the sweep to submit its batch and tag its cell run with it", interval=0.5)
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
    assert server.batches.submissions == 1
    from experiments.sweep import main

    # --collect while the provider still works on it: reported, nothing read, nothing submitted.
    assert cli_main(main, ["--config", str(path), "--catalog", str(repo_root / "experiments/configs/models.yaml"), "--collect"]) == 0
    assert "(api-judge, openai, 2 requests): in_progress, not finished" in capsys.readouterr().out

    server.batches.hold = False
    outcome = run_sweep(load_config(path, catalog=repo_root / "experiments/configs/models.yaml"))
    assert server.batches.submissions == 1  # picked up, not submitted again
    [cell] = outcome.cells
    assert cell.status == "finished" and cell.generated == 2
    run = tracking.client().get_run(cell.run_id)
    [batch_id] = list(server.batches.batches)
    assert run.data.tags[f"narrative_eval.batch.{batch_id}"] == "2"  # tagged by the killed process, same run resumed
    assert run.data.metrics["judge/api-judge/failure_rate"] == 0.0
    assert RequestCache(cache_path).open_batches() == []


def test_the_budget_stops_a_sweep_that_would_exceed_it(server, tmp_path, repo_root, capsys):
    from experiments.sweep import main

    path = write_config(tmp_path, "budget", server, batch=False, extra="max_cost_usd: 0.001")
    args = ["--config", str(path), "--catalog", str(repo_root / "experiments/configs/models.yaml")]
    # Two judge calls, each at most 400 prompt + 384 reply tokens at $0.40 / $1.60 per million.
    assert cli_main(main, args + ["--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "synchronous $0.0015, batch $0.0008, as configured $0.0015" in dry and "over it by $0.0005" in dry
    assert cli_main(main, args) == 2
    err = capsys.readouterr().err
    [line] = [text for text in err.splitlines() if text.startswith("error:")]  # MLflow logs its own lines too
    assert line.startswith("error: sweep 'budget-") and "over max_cost_usd $0.0010 by $0.0005" in line
    assert "Nothing was sent" in line and "Traceback" not in err
    assert server.requests() == []
    # In batch mode the same grid fits: half the price.
    assert cli_main(main, args + ["--batch", "--dry-run"]) == 0
    assert "over it" not in capsys.readouterr().out


@pytest.mark.parametrize("config", ["seed_variance.yaml", "judge_sensitivity.yaml"])
def test_study_dry_runs_print_both_cost_estimates(config, capsys):
    from experiments.sweep import main

    assert cli_main(main, ["--config", str(REPO / "experiments/configs" / config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    line = next(text for text in out.splitlines() if text.startswith("estimated cost"))
    sync, batch = (float(line.split(f"{word} $")[1].split(",")[0]) for word in ("synchronous", "batch"))
    assert sync > 0 and batch == pytest.approx(sync / 2, abs=0.01)
