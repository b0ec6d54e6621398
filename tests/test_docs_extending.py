"""docs/extending.md shows the example continuation study's whole code: the page's block is the file that
tests/examples/test_continuation.py runs end to end (a sweep, its report, the app's Runs tab), so the page cannot
drift from a working study."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
STUDY = ROOT / "examples" / "continuation" / "narrative_eval_continuation" / "study.py"


def python_blocks(markdown: str) -> list[str]:
    return [block.strip("\n") for block in re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)]


def test_the_page_shows_the_example_study_as_it_is():
    assert STUDY.read_text(encoding="utf-8").strip("\n") in python_blocks(PAGE.read_text(encoding="utf-8"))
