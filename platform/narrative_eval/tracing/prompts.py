"""The prompts and rubrics a cell used (its study names them), in MLflow's prompt registry: a new version only when
the text changed, each linked to the run and listed on its experiment's Prompts page."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow import MlflowClient


SHA_TAG = "narrative_eval.sha256"
"""Prompt version tag: sha256 of the template, so an unchanged text reuses its version."""

EXPERIMENTS_TAG = "_mlflow_experiment_ids"
"""Prompt tag MLflow's experiment Prompts page filters on: ',<id>,<id>,' (its own linking runs in a thread, on the
active experiment only)."""

MLFLOW_LINK_THREAD = "link_prompt_to_experiment_thread"
"""Name prefix of the threads MLflow starts to tag a newly registered prompt with the active experiment."""

_versions: dict[tuple[str, str, str], Any] = {}
"""(tracking URI, prompt name, sha256 of its text) -> the version this process registered or found for it."""

_listed: set[tuple[str, str, str]] = set()
"""(tracking URI, prompt name, experiment id) this process listed the prompt on already."""


def register_prompts(client: MlflowClient, run_id: str, experiment_id: str,
                     templates: dict[str, Any]) -> dict[str, int]:
    """Register each template (reusing the latest version when its text is unchanged), link it to the run and
    to the experiment; returns name -> version. The cells of a sweep share their prompts: each text is looked up,
    and listed on its experiment, once per process (about 0.2 s a cell on 2 CPU cores)."""
    versions = {}
    for name, template in templates.items():
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
        known = (client.tracking_uri, name, digest)
        version = _versions.get(known) or _latest_with(client, name, digest)
        if version is None:
            version = client.register_prompt(name, template, tags={SHA_TAG: digest},
                                             commit_message="registered by narrative-eval on first use")
        _versions[known] = version
        client.link_prompt_version_to_run(run_id, version)
        if (client.tracking_uri, name, experiment_id) not in _listed:
            link_to_experiment(client, name, experiment_id)
            _listed.add((client.tracking_uri, name, experiment_id))
        versions[name] = int(version.version)
    return versions


def _wait_for_mlflow_links(timeout: float = 10.0) -> None:
    """Let MLflow's own tagging threads finish first: each rewrites the tag from what it read, and would drop an
    experiment added meanwhile."""
    for thread in threading.enumerate():
        if thread.name.startswith(MLFLOW_LINK_THREAD) and thread is not threading.current_thread():
            thread.join(timeout)


def link_to_experiment(client: MlflowClient, name: str, experiment_id: str) -> None:
    """List the prompt on the experiment's Prompts page (kept when it is already listed there)."""
    _wait_for_mlflow_links()  # registering and loading a prompt each start one
    listed = [i for i in str(client.get_prompt(name).tags.get(EXPERIMENTS_TAG, "")).split(",") if i]
    if experiment_id not in listed:
        client.set_prompt_tag(name, EXPERIMENTS_TAG, f",{','.join([*listed, experiment_id])},")


def _latest_with(client: MlflowClient, name: str, digest: str) -> Any:
    latest = client.load_prompt(f"prompts:/{name}@latest", allow_missing=True, cache_ttl_seconds=0)
    return latest if latest is not None and latest.tags.get(SHA_TAG) == digest else None
