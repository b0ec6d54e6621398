"""Tiny sweeps that two test modules each run with the same requests.

Each pair of modules is one xdist group, so both run on one worker: the first in collection order runs the sweep,
the second asks the same requests again and the session's request cache answers them, so its sweep checks what the
module is about (the command line and the app; MLflow's traces) on the model's replies read once. Run alone, the
second module generates them itself: the same replies.

- CREATIVE: tests/studies/test_incremental.py runs two shipped tasks in process, both conditions, judged by the
  embedded SmolLM2; tests/ui/test_annotate_stories.py runs the first task through the command line and rates its
  stories in the app.
- INFILLING: tests/test_sweep.py runs two shipped instances at L1 and L2, two seeds, judged; the L2 cell of
  tests/tracing/test_evaluation_records.py asks the same.

One sweep is shared outright, not only its requests: CONTINUATION, the example plugin study's tiny sweep, is run once
per session (the `continuation_sweep` fixture of tests/conftest.py) into the app's tracking store. The example's
command-line tests (tests/examples/test_continuation.py) read it, and the app's Launch test
(tests/ui/test_truthful_app.py) launches the same config with one more, broken, model under the same sweep name: its
finished cells are skipped, so the job runs only the broken model's cells.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

CREATIVE_GROUP = "tiny-creative-sweep"
"""The xdist group of the creative pair (tests/conftest.py keeps a module's own group)."""

CREATIVE: dict[str, Any] = {
    "seeds": [0],
    "generation": {"temperature": 0.8, "max_new_tokens": 48},
    "judges": [{"id": "smollm2-judge", "model": "smollm2", "max_new_tokens": 384}],
    # No regeneration; a cut reply is judged, flagged (SmolLM2 rarely ends a story in 48 tokens).
    "truncation": {"regenerate": 0, "score": True},
}
"""Sweep config keys of the creative pair."""

INFILLING_GROUP = "tiny-infilling-sweep"
"""The xdist group of the infilling pair."""

INFILLING: dict[str, Any] = {
    "limit": 2,
    "models": ["smollm2"],
    "seeds": [0, 1],
    "generation": {"temperature": 0.3, "max_new_tokens": 40},
    "judges": [{"id": "tiny-judge", "model": "smollm2"}],
}
"""Sweep config keys of the infilling pair (each adds its data file, prompt settings and control items)."""


CONTINUATION_SWEEP = "continuation-example"
"""The shared continuation sweep's name (the Launch test types it in the form)."""

CONTINUATION: dict[str, Any] = {
    "study": "continuation",
    "sweep": CONTINUATION_SWEEP,
    "data": str(REPO / "data/infilling/sample.jsonl"),
    "limit": 2,
    "opening_sentences": 3,
    "models": ["smollm2"],
    "prompt_settings": ["plain", "guided"],
    "generation": {"temperature": 0.3, "max_new_tokens": 20},
    "judges": ["smollm2-judge"],
}
"""The shared continuation sweep's config (each user adds its report_dir)."""


def config_lines(settings: dict[str, Any]) -> str:
    """Settings as YAML lines of a sweep config."""
    return yaml.safe_dump(settings, sort_keys=False)


def set_arguments(settings: dict[str, Any]) -> list[str]:
    """Settings as `--set` arguments of `python -m experiments.sweep`."""
    arguments = []
    for key, value in settings.items():
        arguments += ["--set", f"{key}={yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()}"]
    return arguments


@contextlib.contextmanager
def tracking_store(env: dict[str, str]) -> Iterator[None]:
    """This process reads and writes the tracking store (and artifact root) of `env` meanwhile."""
    names = ("MLFLOW_TRACKING_URI", "NARRATIVE_EVAL_ARTIFACT_ROOT")
    saved = {name: os.environ[name] for name in names}
    os.environ.update({name: env[name] for name in names})
    try:
        yield
    finally:
        os.environ.update(saved)


@dataclass(frozen=True)
class SharedSweep:
    """A sweep run once for the session through the command line."""

    name: str
    config: Path
    """Its config file (report_dir: the folder `report` beside it)."""
    printed: str
    """What the command printed."""
