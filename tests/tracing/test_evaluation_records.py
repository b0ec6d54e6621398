"""A finished cell's MLflow evaluation records, in a real (temporary) store: its dataset (the run's input and an
evaluation dataset on the experiment), one trace per generation with gold, metric and judge assessments (tagged
with model, setting and condition, numbers rounded), the prompt versions used (on the experiment's Prompts page
too), and run descriptions."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest
from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.metrics import metric_names
from narrative_eval.sweep import run_sweep
from narrative_eval.tracing import DESCRIPTION_TAG, dataset_digest, log_cell_records
from narrative_eval.tracing.datasets import SWEEPS_TAG, dataset_name
from narrative_eval.tracing.traces import DIGITS
from tests import shared_sweeps

# On one xdist worker with tests/test_sweep.py: judged_sweep asks what that module's L2 cell asked (tests/shared_sweeps.py).
pytestmark = pytest.mark.xdist_group(shared_sweeps.INFILLING_GROUP)
SEEDS = tuple(shared_sweeps.INFILLING["seeds"])
LIMIT = shared_sweeps.INFILLING["limit"]


@pytest.fixture(scope="module")
def judged_sweep(tmp_path_factory, repo_root):
    """One judged cell; no control items (tests/test_sweep.py checks the embedded judge on them)."""
    folder = tmp_path_factory.mktemp("records")
    path = folder / "records.yaml"
    path.write_text(f"""
study: infilling
sweep: records-{folder.name}
data: {repo_root / 'data/infilling/sample.jsonl'}
prompt_settings: [L2]
judge_checks: false
report_dir: {folder / 'report'}
""" + shared_sweeps.config_lines(shared_sweeps.INFILLING))
    config = load_config(path, catalog=repo_root / "experiments/configs/models.yaml")
    outcome = run_sweep(config)
    assert outcome.count("finished") == 1, [c.error for c in outcome.cells]
    return config, outcome


def cell_traces(run_id: str) -> list:
    experiment = tracking.client().get_run(run_id).info.experiment_id
    return mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")


def test_one_trace_per_instance_and_seed_with_gold_metrics_and_judge(judged_sweep):
    config, outcome = judged_sweep
    run_id = outcome.cells[0].run_id
    traces = cell_traces(run_id)
    assert len(traces) == LIMIT * len(SEEDS)
    keys = {t.info.tags["narrative_eval.trace_key"] for t in traces}
    assert len(keys) == len(traces)
    dimensions = ("fluency", "faithfulness", "coherence", "consistency", "informativeness")
    for trace in traces:
        by_name = {a.name: a for a in trace.info.assessments}
        assert by_name["gold"].expectation is not None and by_name["gold"].expectation.value
        for metric in metric_names(config.metrics):
            assert by_name[metric].source.source_type == "CODE", metric
        for dimension in dimensions:
            assessment = by_name[f"tiny-judge/{dimension}"]
            assert assessment.source.source_type == "LLM_JUDGE"
            assert assessment.feedback.value is not None or assessment.feedback.error is not None
        span = trace.data.spans[0]
        assert span.inputs["messages"][-1]["role"] == "user"
        assert span.attributes["model"] == "smollm2" and span.attributes["seed"] in SEEDS
        assert "raw_reply" in span.outputs
        # Real durations and token counts, as MLflow's trace list shows them.
        assert trace.info.execution_duration == pytest.approx(1000 * span.attributes["seconds"], abs=2)
        usage = trace.info.token_usage
        assert usage["input_tokens"] > 0 and usage["output_tokens"] == span.attributes["completion_tokens"]


def test_generation_rows_carry_their_trace_ids(judged_sweep):
    _, outcome = judged_sweep
    run_id = outcome.cells[0].run_id
    rows = tracking.load_table(run_id, "generations.json")
    trace_ids = {t.info.trace_id: t.info.tags["narrative_eval.trace_key"] for t in cell_traces(run_id)}
    assert set(rows["trace_id"]) == set(trace_ids)
    for _, row in rows.iterrows():
        assert trace_ids[row["trace_id"]] == f"{row['instance_id']}/seed{row['seed']}"


def test_dataset_prompt_versions_and_descriptions(judged_sweep):
    _, outcome = judged_sweep
    c = tracking.client()
    run = c.get_run(outcome.cells[0].run_id)
    inputs = run.inputs.dataset_inputs
    assert [d.dataset.name for d in inputs] == ["sample.jsonl"]
    # The digest names the file, then the rows used: another limit of the same file is another dataset.
    assert inputs[0].dataset.digest.startswith(outcome.cells[0].cell.data_sha256[:20])
    assert json.loads(inputs[0].dataset.profile)["num_rows"] == LIMIT
    versions = dict(item.split("/") for item in run.data.tags["narrative_eval.prompt_versions"].split(","))
    assert set(versions) == {"infilling.L2", "rubric.infilling_narrative"}
    prompt = c.load_prompt(f"prompts:/infilling.L2/{versions['infilling.L2']}")
    assert "{{problem}}" in json.dumps(prompt.template)
    description = run.data.tags[DESCRIPTION_TAG]
    # The headline numbers under the labels the app and the reports use, not the logged names.
    assert "smollm2 · L2" in description and "AtAvg " in description and "ROUGE-1 " in description
    assert "tiny-judge QAvg " in description and "at_avg" not in description
    parent = c.get_run(outcome.parent_run_id)
    assert "| smollm2" in parent.data.tags[DESCRIPTION_TAG]


def test_logging_a_cell_again_replaces_its_traces_and_reuses_prompt_versions(judged_sweep):
    """A resumed cell (killed while logging) ends with one trace per generation and one assessment per name."""
    _, outcome = judged_sweep
    from narrative_eval.study import Runtime, load_study
    from narrative_eval.cells import BackendPool

    cell = outcome.cells[0].cell
    run_id = outcome.cells[0].run_id
    before = {t.info.tags["narrative_eval.trace_key"]: len(t.info.assessments) for t in cell_traces(run_id)}
    versions = tracking.client().get_run(run_id).data.tags["narrative_eval.prompt_versions"]
    result = load_study(cell.study).run_cell(cell, Runtime(backend_for=BackendPool()))  # all from the request cache
    log_cell_records(tracking.client(), run_id, cell, result, load_study(cell.study).evaluation(cell, result))
    after = {t.info.tags["narrative_eval.trace_key"]: len(t.info.assessments) for t in cell_traces(run_id)}
    assert after == before
    assert tracking.client().get_run(run_id).data.tags["narrative_eval.prompt_versions"] == versions


def test_a_dataset_is_named_by_its_file_and_its_rows():
    rows = pd.DataFrame({"instance_id": ["a", "b"], "gold": ["one.", "two."]})
    digest = dataset_digest("f" * 64, rows)
    assert digest.startswith("f" * 20) and len(digest) == 32
    assert dataset_digest("f" * 64, rows.copy()) == digest  # the same rows, the same dataset
    assert dataset_digest("f" * 64, rows.head(1)) != digest  # a smaller limit of the same file is another one


def test_traces_carry_model_setting_and_condition_tags_and_rounded_numbers(judged_sweep):
    _, outcome = judged_sweep
    cell = outcome.cells[0].cell
    experiment = tracking.client().get_run(outcome.cells[0].run_id).info.experiment_id
    traces = cell_traces(outcome.cells[0].run_id)
    for trace in traces:
        tags = trace.info.tags
        assert (tags["model"], tags["prompt_setting"], tags["condition"], tags["sweep"]) == (
            cell.model.id, cell.prompt_setting, cell.condition, cell.sweep)
        for assessment in trace.info.assessments:
            value = assessment.feedback.value if assessment.feedback is not None else None
            if isinstance(value, float):
                assert value == round(value, DIGITS), assessment.name
        assert trace.data.spans[0].attributes["seconds"] == round(trace.data.spans[0].attributes["seconds"], DIGITS)
    # The trace list can be filtered by them.
    found = mlflow.search_traces(locations=[experiment], filter_string=f"tags.model = '{cell.model.id}' and "
                                 f"tags.prompt_setting = '{cell.prompt_setting}'", return_type="list")
    assert {t.info.trace_id for t in found} >= {t.info.trace_id for t in traces}


def test_the_inputs_are_an_evaluation_dataset_of_the_experiment(judged_sweep):
    _, outcome = judged_sweep
    c = tracking.client()
    cell = outcome.cells[0].cell
    experiment = c.get_run(outcome.cells[0].run_id).info.experiment_id
    datasets = [d for d in c.search_datasets(experiment_ids=[experiment]) if d.name == dataset_name(cell)]
    assert len(datasets) == 1
    dataset = c.get_dataset(datasets[0].dataset_id)
    assert cell.sweep in dataset.tags[SWEEPS_TAG].split(",")
    records = dataset.to_df()
    # The dataset belongs to the study and data file, so other sweeps on the same file (in this store) add
    # their instances; each instance is there once, however many seeds and however often it was logged.
    listed = [r["instance_id"] for r in records["inputs"]]
    assert len(listed) == len(set(listed))
    ours = set(tracking.load_table(outcome.cells[0].run_id, "generations.json")["instance_id"])
    assert len(ours) == LIMIT and ours <= set(listed)
    assert all(r["instance_id"] for r in records["inputs"]) and all(e["gold"] for e in records["expectations"])


def test_prompts_are_listed_on_the_experiments_prompts_page(judged_sweep):
    _, outcome = judged_sweep
    c = tracking.client()
    experiment = c.get_run(outcome.cells[0].run_id).info.experiment_id
    listed = {p.name for p in c.search_prompts(filter_string=f"experiment_id = '{experiment}'")}
    assert {"infilling.L2", "rubric.infilling_narrative"} <= listed
