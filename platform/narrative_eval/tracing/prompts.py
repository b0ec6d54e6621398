"""The prompts and rubrics a cell used (its study names them), in MLflow's prompt registry: a new version only when
the text changed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mlflow import MlflowClient


SHA_TAG = "narrative_eval.sha256"
"""Prompt version tag: sha256 of the template, so an unchanged text reuses its version."""


def register_prompts(client: MlflowClient, run_id: str, templates: dict[str, Any]) -> dict[str, int]:
    """Register each template (reusing the latest version when its text is unchanged), link it to the run;
    returns name -> version."""
    versions = {}
    for name, template in templates.items():
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
        version = _latest_with(client, name, digest)
        if version is None:
            version = client.register_prompt(name, template, tags={SHA_TAG: digest},
                                             commit_message="registered by narrative-eval on first use")
        client.link_prompt_version_to_run(run_id, version)
        versions[name] = int(version.version)
    return versions


def _latest_with(client: MlflowClient, name: str, digest: str) -> Any:
    latest = client.load_prompt(f"prompts:/{name}@latest", allow_missing=True, cache_ttl_seconds=0)
    return latest if latest is not None and latest.tags.get(SHA_TAG) == digest else None
