"""A metric's model loads whole or not at all, whatever its path says: the embedded MiniLM copied under paths holding
bert-score's special words ("t5", "scibert") scores exactly as it does where it is shipped, and a copy with a weights
file cut short, removed, or missing one weight is a ModelLoadError naming the model and the path, for BERTScore and
Sem-F1 alike; a sweep given one stops with one `error:` line before anything is generated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from narrative_eval.errors import ModelLoadError
from narrative_eval.metrics.bertscore import BertScore
from narrative_eval.metrics.semf1 import SemF1
from narrative_eval.weights import resolve_weights, weights_identity
from tests.test_cli_errors import QUICKSTART, errors_of, run_sweep_command

CANDIDATES = ["The boats had already left the harbour when Maria arrived.", "A dog barked twice in the night."]
REFERENCES = ["By the time Maria reached the docks, the fishing boats were gone.", "The night was silent."]
WEIGHTS_FILE = "model.safetensors"
DROPPED = "encoder.layer.2.attention.self.query.weight"
"""A weight of the model that the broken copy lacks (transformers would fill it with random values)."""


@pytest.fixture(scope="module")
def minilm() -> Path:
    return Path(resolve_weights("embedded:all-minilm-l6-v2"))


def copy_of(minilm: Path, where: Path) -> Path:
    where.parent.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(minilm, where))


@pytest.fixture(scope="module")
def broken(minilm, tmp_path_factory) -> dict[str, Path]:
    """Copies of the model with their weights cut short, removed, or one weight short."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("broken")
    cut = copy_of(minilm, root / "cut")
    data = (cut / WEIGHTS_FILE).read_bytes()
    (cut / WEIGHTS_FILE).write_bytes(data[: len(data) // 2])
    removed = copy_of(minilm, root / "removed")
    (removed / WEIGHTS_FILE).unlink()
    dropped = copy_of(minilm, root / "dropped")
    tensors = load_file(dropped / WEIGHTS_FILE)
    del tensors[DROPPED]
    save_file(tensors, dropped / WEIGHTS_FILE, metadata={"format": "pt"})
    return {"cut": cut, "removed": removed, "dropped": dropped}


@pytest.mark.parametrize("where", ["t5-models/all-minilm", "scibert-minilm", "home/mt5user/minilm"])
def test_a_special_word_in_the_path_changes_nothing(minilm, tmp_path, bertscore, semf1, where):
    copy = copy_of(minilm, tmp_path / where)
    assert BertScore(model=str(copy)).score(CANDIDATES, REFERENCES) == bertscore.score(CANDIDATES, REFERENCES)
    assert SemF1(model=str(copy)).score(CANDIDATES, REFERENCES) == semf1.score(CANDIDATES, REFERENCES)


@pytest.mark.parametrize("metric", [BertScore, SemF1])
@pytest.mark.parametrize("damage, said", [("cut", "cannot be read (SafetensorError"),
                                          ("removed", "cannot be read (OSError"),
                                          ("dropped", f"1 weight(s) missing from the checkpoint, which would be newly "
                                                      f"initialised (random): {DROPPED}")])
def test_a_broken_copy_is_an_error_naming_the_model_and_path(broken, metric, damage, said):
    scorer = metric(model=str(broken[damage]))
    with pytest.raises(ModelLoadError) as raised:
        scorer.load()
    message = str(raised.value)
    assert str(broken[damage]) in message and said in message
    assert message.startswith("BERTScore model" if metric is BertScore else "Sem-F1 sentence-embedding model")
    with pytest.raises(ModelLoadError):  # nothing half-loaded was kept: scoring asks again, and fails again
        scorer.score(CANDIDATES, REFERENCES)


def test_each_metric_logs_the_identity_of_its_weights(bertscore, semf1, rouge1, minilm):
    assert bertscore.run_params() == {"metric/bertscore/weights": weights_identity(str(minilm))}
    assert semf1.run_params() == {"metric/semf1/weights": weights_identity(str(minilm))}
    assert rouge1.run_params() == {}


def test_a_sweep_given_broken_weights_stops_with_one_error_line(broken):
    result = run_sweep_command("--config", str(QUICKSTART), "--limit", "1", "--set", "judges=[]",
                               "--set", "models=[smollm2]", "--set", "prompt_settings=[L2]",
                               "--set", f"metrics.bertscore_model={broken['cut']}", "--no-progress")
    assert result.returncode == 2, result.stderr[-3000:]
    [line] = errors_of(result)
    assert line.startswith(f"error: BERTScore model at {broken['cut']}: the weights cannot be read"), line
    assert "Traceback" not in result.stderr
    # Nothing was left to resume, so no resume hint: the error line is all the user reads.
    assert [line for line in result.stderr.splitlines() if line.strip()] == [line], result.stderr[-3000:]
