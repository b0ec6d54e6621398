"""The prompts and rubrics a cell used, in MLflow's prompt registry: a new version only when the text changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mlflow import MlflowClient

from narrative_eval.judges.rubric import load_rubric
from narrative_eval.prompts.render import PROMPT_SETTINGS, prompt_file_for
from narrative_eval.records import CellSpec

SHA_TAG = "narrative_eval.sha256"
"""Prompt version tag: sha256 of the template, so an unchanged text reuses its version."""


def used_templates(cell: CellSpec, result: Any) -> dict[str, str | list[dict[str, str]]]:
    """Registry name -> template (text or chat messages, with MLflow's own {{slot}} syntax) for every prompt
    setting and rubric the cell used."""
    templates: dict[str, str | list[dict[str, str]]] = {}
    if cell.study == "infilling":
        prompts = prompt_file_for(cell.prompt_setting, cell.extra.get("prompt_file"))
        user = prompts.settings[cell.prompt_setting]["user"]
        templates[f"infilling.{cell.prompt_setting}"] = [{"role": "system", "content": prompts.system},
                                                         {"role": "user", "content": user}]
    elif cell.prompt_setting in PROMPT_SETTINGS and isinstance(PROMPT_SETTINGS.get(cell.prompt_setting), str):
        templates[f"{cell.study}.{cell.prompt_setting}"] = PROMPT_SETTINGS.get(cell.prompt_setting)
    rubrics = {j.rubric for j in cell.judges if j.rubric} | {
        name for name in str(result.params.get("rubric", "")).split(",") if name}
    for name in sorted(rubrics):
        rubric = load_rubric(name)
        templates[f"rubric.{Path(rubric.name).stem}"] = [{"role": "system", "content": rubric.system},
                                                         {"role": "user", "content": rubric.user}]
    return templates


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
