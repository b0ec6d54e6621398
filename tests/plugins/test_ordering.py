"""A single-turn study from outside the repo (`ordering_plugin/`, 40 lines of Python): sentence ordering, its answer
parsed into a list, its own metric of negative range that no other study computes by default, a judge that sees the
passage in the model's order (derived from the item and the answer), and control checks chosen by what that judge
sees, which a judge right by construction passes.

The plugin is installed into a temporary folder; everything that uses it runs in a subprocess with that folder on
PYTHONPATH, so the registries of this test process never see it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]
PASSAGES = REPO / "data/infilling/passages/news.jsonl"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(target), str(HERE / "ordering_plugin")], check=True, timeout=300)
    return target


def plugin_env(plugin_path: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_path), env.get("PYTHONPATH", "")])
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env["NARRATIVE_EVAL_CACHE"] = str(tmp_path / "requests.sqlite")
    return env


def run_with_plugin(plugin_path: Path, tmp_path: Path, script: str) -> dict:
    """Run `script` in a fresh interpreter that has the plugin installed; it prints one JSON object last."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=plugin_env(plugin_path, tmp_path),
                          capture_output=True, text=True, timeout=1200, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def ordering_config(tmp_path: Path, data: Path = PASSAGES, **extra: str) -> Path:
    config = tmp_path / "ordering.yaml"
    lines = {"study": "ordering", "sweep": "plugin-ordering", "data": str(data), "models": "[smollm2]",
             "prompt_settings": "[order]", **extra}
    config.write_text("".join(f"{key}: {value}\n" for key, value in lines.items()), encoding="utf-8")
    return config


def test_its_controls_fit_what_its_judge_sees_and_a_right_judge_passes_them(plugin_path, tmp_path):
    found = run_with_plugin(plugin_path, tmp_path, f"""
        import json
        from narrative_eval.config import load_config
        from narrative_eval.data import load_rows, sentences
        from narrative_eval.judges.checks import judge_controls, refusal_text
        from narrative_eval.stats.judge_checks import check_rows
        from narrative_eval.study import load_study
        from narrative_eval.sweep import expand_grid
        from tests.control_judges import control_judge

        config = load_config({str(ordering_config(tmp_path))!r}, catalog={str(REPO / 'experiments/configs/models.yaml')!r})
        study, cells = load_study("ordering"), expand_grid(config)
        # The passages in their true order are the good texts; anything else (shuffled, a refusal) is not.
        passages = [" ".join(sentences(row["text"])[:5]) for row in load_rows({str(PASSAGES)!r}, ["text"])]
        verdicts = {{}}
        for kind in ("control-oracle", "control-constant"):
            backend, judge = control_judge(kind, [("", passage) for passage in passages], refusal_text())
            [group] = study.control_items(config, cells, judge, 20)
            rows = check_rows(judge.id, judge_controls(backend, group.judge, group.items))
            verdicts[kind] = {{row.check: [row.passed, row.n] for row in rows}}
        print(json.dumps({{"verdicts": verdicts}}))
    """)
    # The judge sees only the answer (the passage in the model's order): another item's true order is another good
    # passage, so no reference-swap control; the shuffled passage, a refusal and the passage padded with filler fit.
    # A constant judge fails the first two and passes the length check (it never scores the padded one higher).
    assert found["verdicts"]["control-oracle"] == {"shuffled_sentences": [True, 20], "refusal": [True, 20],
                                                   "padded_output": [True, 20]}
    assert found["verdicts"]["control-constant"] == {"shuffled_sentences": [False, 20], "refusal": [False, 20],
                                                     "padded_output": [True, 20]}


def test_its_answer_is_a_structure_and_its_metric_is_its_own(plugin_path, tmp_path):
    found = run_with_plugin(plugin_path, tmp_path, f"""
        import json
        from narrative_eval.config import load_config
        from narrative_eval.data import load_rows, sentences
        from narrative_eval.evaluation import shown_to_judge
        from narrative_eval.metrics import get_metric
        from narrative_eval.study import load_study
        from narrative_eval.sweep import expand_grid

        catalog = {str(REPO / 'experiments/configs/models.yaml')!r}
        [cell] = expand_grid(load_config({str(ordering_config(tmp_path, limit='4'))!r}, catalog=catalog))
        study = load_study("ordering")
        item = study.cell_items(cell)[0]
        true = item.references["order"]
        answers = {{reply: study.answer(cell, item, reply) for reply in ("5, 4, 3, 2 and 1", "Order: 1 2 2 9", true)}}
        infilling = expand_grid(load_config({str(REPO / 'experiments/configs/quickstart.yaml')!r}, catalog=catalog))[0]
        tau = get_metric("kendall_tau")
        row = next(row for row in load_rows({str(PASSAGES)!r}, ["text"]) if row["ref_id"] == item.id)
        print(json.dumps({{
            "metrics": list(cell.metrics.names), "infilling_metrics": list(infilling.metrics.names),
            "answers": {{reply: [a.text, a.status, a.value] for reply, a in answers.items()}},
            "tau": tau.score(["1 2 3 4 5", "5 4 3 2 1"], ["1 2 3 4 5", "1 2 3 4 5"]),
            "shown": shown_to_judge(study.judge_sees, item, answers[true]), "original": " ".join(sentences(row["text"])[:5]),
            "columns": dict(item.shown), "items": len(study.cell_items(cell)), "true": true}}))
    """)
    assert found["metrics"] == ["kendall_tau"]
    assert "kendall_tau" not in found["infilling_metrics"] and "chrf" in found["infilling_metrics"]
    assert found["tau"] == pytest.approx([1.0, -1.0])
    assert found["answers"]["5, 4, 3, 2 and 1"] == ["5 4 3 2 1", "ok", [5, 4, 3, 2, 1]]
    assert found["answers"]["Order: 1 2 2 9"] == [None, "incomplete", [1, 2]]
    # The judge reads the passage in the order given: the true order gives the passage as written.
    assert found["answers"][found["true"]][2] == [int(n) for n in found["true"].split()]
    assert found["shown"] == {"passage": found["original"]}
    assert found["columns"] == {"dataset": "news"} and found["items"] == 4


def test_a_data_row_without_a_field_is_an_error_line_and_exit_2(plugin_path, tmp_path):
    data = tmp_path / "passages.jsonl"
    rows = [json.loads(line) for line in PASSAGES.read_text(encoding="utf-8").splitlines()[:3]]
    del rows[1]["text"]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "experiments.sweep", "--config", str(ordering_config(tmp_path, data)),
                           "--dry-run"], env=plugin_env(plugin_path, tmp_path), capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"error: {data}:2: missing field(s): text (the row has: {', '.join(rows[1])})"]
