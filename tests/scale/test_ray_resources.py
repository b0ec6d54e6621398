"""What each cell asks Ray for, and the environment its worker gets (no Ray instance needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from narrative_eval.config import load_config
from narrative_eval.executors import EXECUTORS
from narrative_eval.executors.ray import CellResources, cell_resources, run_ray, worker_env
from narrative_eval.sweep import expand_grid


@pytest.fixture()
def grid_config(tmp_path, repo_root):
    def make(executor_options: str, judge_model: str = "smollm2"):
        path = tmp_path / "grid.yaml"
        path.write_text(
            f"""
study: infilling
sweep: resources
data: {repo_root / 'data/infilling/sample.jsonl'}
models:
  - smollm2
  - {{id: big-vllm, backend: vllm, weights: /models/big, options: {{tensor_parallel_size: 4}}}}
prompt_settings: [L2]
judges:
  - {{id: judge, model: {judge_model}}}
cache: relative/requests.sqlite
executor_options: {executor_options}
"""
        )
        return load_config(path, catalog=repo_root / "experiments/configs/models.yaml")

    return make


def test_ray_is_a_registered_executor():
    assert EXECUTORS.get("ray") is run_ray and EXECUTORS.entry("ray").origin == "narrative_eval.executors.ray"


def test_defaults_and_tensor_parallel_groups(grid_config):
    small, big = expand_grid(grid_config("{}"))
    assert cell_resources(small, {}) == CellResources(num_cpus=1.0, num_gpus=0.0)
    # A vLLM cell holds its whole tensor-parallel group.
    assert cell_resources(big, {}).num_gpus == 4.0


def test_a_vllm_judge_makes_every_cell_hold_its_gpus(grid_config):
    judge = "{id: vllm-judge, backend: vllm, weights: /models/judge, options: {tensor_parallel_size: 2}}"
    small, big = expand_grid(grid_config("{}", judge_model=judge))
    assert cell_resources(small, {}).num_gpus == 2.0
    assert cell_resources(big, {}).num_gpus == 4.0


def test_options_and_per_model_overrides(grid_config):
    config = grid_config("{num_cpus: 2, num_gpus: 1, memory: 1000000, resources: {A100: 1}, "
                         "per_model: {big-vllm: {num_gpus: 8, num_cpus: 6}}}")
    small, big = expand_grid(config)
    options = config.executor_options
    assert cell_resources(small, options).ray_options() == {
        "num_cpus": 2.0, "num_gpus": 1.0, "memory": 1000000, "resources": {"A100": 1.0}}
    assert cell_resources(big, options).ray_options() == {
        "num_cpus": 6.0, "num_gpus": 8.0, "memory": 1000000, "resources": {"A100": 1.0}}


def test_unknown_per_model_key_is_refused(grid_config):
    config = grid_config("{per_model: {smollm2: {gpus: 1}}}")
    with pytest.raises(ValueError, match="gpus"):
        cell_resources(expand_grid(config)[0], config.executor_options)


def test_worker_env_makes_local_stores_absolute(grid_config, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    monkeypatch.setenv("NARRATIVE_EVAL_ARTIFACT_ROOT", "artifacts")
    env = worker_env(grid_config("{}"))
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert env["NARRATIVE_EVAL_CACHE"] == str(tmp_path / "relative" / "requests.sqlite")
    assert env["NARRATIVE_EVAL_ARTIFACT_ROOT"] == str(tmp_path / "artifacts")


def test_worker_env_keeps_servers_and_absolute_paths(grid_config, monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    monkeypatch.delenv("NARRATIVE_EVAL_ARTIFACT_ROOT", raising=False)
    config = grid_config("{}").model_copy(update={"cache": str(tmp_path / "cache.sqlite")})
    env = worker_env(config)
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow.internal:5000"
    assert env["NARRATIVE_EVAL_CACHE"] == str(tmp_path / "cache.sqlite")
    assert "NARRATIVE_EVAL_ARTIFACT_ROOT" not in env
    assert Path(env["NARRATIVE_EVAL_CACHE"]).is_absolute()
