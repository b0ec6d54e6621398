"""docs/config.md, the config reference, is what its generator writes from the config models today."""

from __future__ import annotations

from experiments.config_reference import COMMAND, PAGE, markdown
from narrative_eval.config import SweepConfig


def test_the_committed_config_reference_is_the_generators_output():
    page = markdown()
    assert PAGE.read_text(encoding="utf-8") == page, f"docs/config.md is out of date: run `{COMMAND}`"
    # Every key of a sweep config has its row, with a meaning (its docstring) after its type and default.
    for key in set(SweepConfig.model_fields) - {"section"}:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{key}` |"))
        assert row.split(" | ")[-1].strip(" |"), row
