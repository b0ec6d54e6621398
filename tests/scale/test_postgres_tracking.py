"""A tiny sweep tracked by a team-style MLflow server: PostgreSQL backend store, artifacts served over HTTP."""

from __future__ import annotations

import pytest

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.sweep import run_sweep
from tests.tracing.test_bulk_traces import assert_alike, written_both_ways

pytestmark = [pytest.mark.postgres, pytest.mark.server, pytest.mark.slow]


@pytest.fixture(scope="module")
def server_sweep(mlflow_server, tmp_path_factory, repo_root):
    """The sweep, run with MLFLOW_TRACKING_URI pointing at the server and no local artifact root."""
    root = tmp_path_factory.mktemp("pg-sweep")
    config_path = root / "tiny.yaml"
    config_path.write_text(
        f"""
study: infilling
sweep: postgres-{root.name}
data: {repo_root / 'data/infilling/sample.jsonl'}
limit: 2
models: [smollm2]
prompt_settings: [L2]
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: 32}}
report_dir: {root / 'report'}
"""
    )
    config = load_config(config_path, catalog=repo_root / "experiments/configs/models.yaml")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
        # Unset, so the experiment takes the server's default artifact location (mlflow-artifacts:/...).
        patch.delenv("NARRATIVE_EVAL_ARTIFACT_ROOT", raising=False)
        outcome = run_sweep(config)
        yield config, outcome


def test_sweep_runs_land_in_postgres(server_sweep, postgres_server, mlflow_server):
    config, outcome = server_sweep
    assert tracking.tracking_uri() == mlflow_server.url
    assert outcome.count("finished") == 1 and outcome.count("failed") == 0
    runs = tracking.sweep_cell_runs("infilling", config.sweep)
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["tags.mlflow.parentRunId"] == outcome.parent_run_id
    assert run["params.model_id"] == "smollm2" and run["params.prompt_setting"] == "L2"
    assert 0.0 <= run["metrics.rouge1"] <= 1.0 and run["metrics.n_instances"] == 2
    # The same rows, read straight from the database the server writes to.
    with postgres_server.connect("mlflow") as connection, connection.cursor() as cursor:
        cursor.execute("SELECT status FROM runs WHERE run_uuid = %s", (run["run_id"],))
        assert cursor.fetchone() == ("FINISHED",)
        cursor.execute("SELECT COUNT(*) FROM runs WHERE run_uuid IN (%s, %s)", (run["run_id"], outcome.parent_run_id))
        assert cursor.fetchone() == (2,)
        cursor.execute("SELECT value FROM metrics WHERE run_uuid = %s AND key = 'rouge1'", (run["run_id"],))
        assert cursor.fetchone()[0] == pytest.approx(run["metrics.rouge1"])


def test_artifacts_are_served_by_the_server(server_sweep, mlflow_server):
    config, _ = server_sweep
    experiment = tracking.client().get_experiment_by_name("infilling")
    assert experiment.artifact_location.startswith("mlflow-artifacts:")
    run_id = tracking.sweep_cell_runs("infilling", config.sweep).iloc[0]["run_id"]
    table = tracking.load_table(run_id, "generations.json")
    assert len(table) == 2
    assert {"instance_id", "raw_reply", "answer", "gold", "rouge1"} <= set(table.columns)
    # The bytes live under the server's --artifacts-destination, not in a client-side directory.
    stored = list(mlflow_server.artifacts.rglob("generations.json"))
    assert any(run_id in str(path) for path in stored)
    assert list(mlflow_server.artifacts.rglob("main.csv")), "the sweep report was not attached to the parent run"


def test_batched_traces_read_back_from_postgres_as_mlflow_writes_them(postgres_server, mlflow_server):
    """A sweep pointed at the database itself writes its traces in batches (tracing/bulk.py), as with SQLite."""
    assert_alike(*written_both_ways(postgres_server.url("mlflow")))
