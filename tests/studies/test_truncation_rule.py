"""The truncation rule of a multi-turn sweep: a config key (`truncation`), carried in a cell's spec only where it
differs from the default (so finished sweeps keep their hashes), warned about by the dry run when the token limit is
below what the study's prompts ask for."""

from __future__ import annotations

import math

import pytest
from experiments.sweep import main

from narrative_eval.config import load_config
from narrative_eval.errors import UserError
from narrative_eval.multi_turn import TOKENS_PER_WORD, Truncation
from narrative_eval.studies.incremental.study import IncrementalDeliveryStudy
from narrative_eval.sweep import expand_grid

CONFIG = "experiments/configs/incremental_embedded.yaml"


def test_the_rule_reaches_every_cell_and_keeps_the_hashes_of_its_extra_encoding(repo_root):
    ruled = expand_grid(load_config(repo_root / CONFIG, ["truncation={regenerate: 0, score: true}"]))
    assert {Truncation.of_cell(cell) for cell in ruled} == {Truncation(regenerate=0, score=True)}
    study = IncrementalDeliveryStudy()
    assert all(study.max_regenerations(cell) == 0 and study.scores_truncated(cell) for cell in ruled)
    # The rule as cells carried it (`extra`) before it was a config key: the same specs, so the same hashes.
    assert all(cell.extra["max_regenerations"] == 0 and cell.extra["score_truncated"] is True for cell in ruled)
    default = expand_grid(load_config(repo_root / CONFIG, ["truncation={}"]))
    assert not any(key in cell.extra for cell in default for key in ("max_regenerations", "score_truncated"))
    assert {Truncation.of_cell(cell) for cell in default} == {Truncation(regenerate=1, score=False)}


def test_the_dry_run_warns_when_the_token_limit_is_below_the_briefs_length(repo_root, capsys):
    assert main(["--config", str(repo_root / CONFIG), "--dry-run", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    # The first task's brief asks for its story in 600 words.
    asked = math.ceil(600 * TOKENS_PER_WORD)
    assert f"warning: smollm2/default/sharded: max_new_tokens 160 is below the {asked} tokens" in out
    assert main(["--config", str(repo_root / CONFIG), "--dry-run", "--limit", "1",
                 "--set", f"generation.max_new_tokens={asked}"]) == 0
    assert "tokens its prompts ask a reply for" not in capsys.readouterr().out


def test_the_rule_said_in_extra_is_an_error_naming_the_key(repo_root):
    with pytest.raises(UserError, match=r"incremental_embedded.yaml: extra.max_regenerations: say it as the config's "
                                        r"truncation rule"):
        load_config(repo_root / CONFIG, ["extra={max_regenerations: 0}"])
