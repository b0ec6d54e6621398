"""A tracking server that refuses traces and assessments (an older MLflow, a server without the tracing tables):
the sweep still logs params, metrics and tables, warns once naming what it skipped, and no run fails.

The server is a real `mlflow server` on a temporary SQLite store; in front of it a small HTTP proxy answers the
tracing endpoints the way a server that lacks them does (404 ENDPOINT_NOT_FOUND) and passes everything else on.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.servers import start_mlflow, stop

pytestmark = [pytest.mark.server, pytest.mark.slow]

REFUSED = ("/traces", "/assessments", "/v1/traces")
"""Path parts of the tracing API (MLflow 3's REST and OTLP endpoints) that an older server does not have."""


class RefusingProxy(BaseHTTPRequestHandler):
    upstream: tuple[str, int]
    refused: list[str]

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if any(part in self.path for part in REFUSED):
            self.refused.append(f"{self.command} {self.path}")
            payload = json.dumps({"error_code": "ENDPOINT_NOT_FOUND", "message": "Not found"}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        connection = http.client.HTTPConnection(*self.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        connection.request(self.command, self.path, body=body or None, headers=headers)
        reply = connection.getresponse()
        data = reply.read()
        self.send_response(reply.status)
        for key, value in reply.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        connection.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def refusing_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusing-server")
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT")}
    process, server_url = start_mlflow(["--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--serve-artifacts",
                                        "--artifacts-destination", str(root / "artifacts")], root / "server.log", env)
    port = int(server_url.rsplit(":", 1)[1])
    handler = type("Handler", (RefusingProxy,), {"upstream": ("127.0.0.1", port), "refused": []})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}", handler.refused, root
    finally:
        proxy.shutdown()
        stop(process)


def test_a_sweep_against_a_server_without_tracing_logs_everything_else(refusing_server, repo_root, tmp_path):
    url, refused, _ = refusing_server
    (tmp_path / "models.yaml").write_text((repo_root / "experiments/configs/models.yaml").read_text())
    config = tmp_path / "refused.yaml"
    config.write_text(f"""
study: infilling
sweep: refused
data: {repo_root / 'data/infilling/sample.jsonl'}
limit: 2
models: [smollm2]
prompt_settings: [L0, L2]
seeds: [0]
generation: {{temperature: 0.0, max_new_tokens: 24}}
judges:
  - id: tiny-judge
    model: smollm2
report_dir: {tmp_path / 'report'}
# What is tested is the tracing refusal: one cheap metric, and no control items (tests/test_sweep_judge_checks.py).
metrics: {{names: [rouge1]}}
judge_checks: false
""")
    env = {k: v for k, v in os.environ.items() if k != "NARRATIVE_EVAL_ARTIFACT_ROOT"}
    env["MLFLOW_TRACKING_URI"] = url
    done = subprocess.run([sys.executable, "-m", "experiments.sweep", "--config", str(config), "--no-progress"],
                          cwd=repo_root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert refused, "the sweep never tried to write a trace"
    # One warning for the whole sweep (two cells), naming what was skipped and why.
    warnings = [line for line in done.stderr.splitlines() if "MLflow traces skipped" in line]
    assert len(warnings) == 1, done.stderr[-3000:]
    assert "ENDPOINT_NOT_FOUND" in warnings[0] or "404" in warnings[0] or "Not found" in warnings[0]

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=url)
    experiment = client.get_experiment_by_name("infilling")
    runs = client.search_runs([experiment.experiment_id], "tags.`narrative_eval.sweep` = 'refused'")
    cells = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(cells) == 2 and {r.info.status for r in runs} == {"FINISHED"}
    for run in cells:
        assert run.data.params["model_id"] == "smollm2"
        assert 0.0 <= run.data.metrics["rouge1"] <= 1.0 and "judge/tiny-judge/qavg" in run.data.metrics
        assert run.inputs.dataset_inputs, "the dataset input does not need the tracing tables"
        rows = json.loads(Path(client.download_artifacts(run.info.run_id, "generations.json", str(tmp_path))).read_text())
        assert len(rows["data"]) == 2
        # No trace was stored, so no row points at one.
        columns = rows["columns"]
        if "trace_id" in columns:
            assert all(row[columns.index("trace_id")] in (None, "") for row in rows["data"])
