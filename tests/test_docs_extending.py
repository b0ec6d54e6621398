"""docs/extending.md shows the example continuation study's whole code, the sentence-ordering plugin's and the
multi-turn `revision` study's: each page block is the file its tests run (tests/examples/test_continuation.py end to
end: a sweep, its report, the app's Runs tab; tests/plugins/test_ordering.py: its parsed answers, metric, data errors
and control checks; tests/plugins/test_plugins.py: a multi-turn sweep, its traces and report), so the page cannot
drift from a working study."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
STUDY = ROOT / "examples" / "continuation" / "narrative_eval_continuation" / "study.py"
MULTI_TURN_STUDY = ROOT / "tests" / "plugins" / "demo_plugin" / "narrative_eval_demo_plugin" / "revision.py"
"""The page's multi-turn example: the test plugin's `revision` study, which tests/plugins/test_plugins.py sweeps."""
ORDERING = ROOT / "tests" / "plugins" / "ordering_plugin" / "narrative_eval_ordering" / "__init__.py"
"""The page's single-turn plugin example: the sentence-ordering study, which tests/plugins/test_ordering.py runs."""


def python_blocks(markdown: str) -> list[str]:
    return [block.strip("\n") for block in re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)]


def test_the_page_shows_the_example_study_as_it_is():
    assert STUDY.read_text(encoding="utf-8").strip("\n") in python_blocks(PAGE.read_text(encoding="utf-8"))


def test_the_page_shows_the_multi_turn_plugin_study_as_it_is():
    assert MULTI_TURN_STUDY.read_text(encoding="utf-8").strip("\n") in python_blocks(PAGE.read_text(encoding="utf-8"))


def test_the_page_shows_the_ordering_plugin_as_it_is():
    assert ORDERING.read_text(encoding="utf-8").strip("\n") in python_blocks(PAGE.read_text(encoding="utf-8"))
