"""Sweep configs as users write them: the catalog wherever the config lives, every problem located, keyed report folders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from narrative_eval.config import SweepConfig, load_config, parse_override
from narrative_eval.config_errors import annotation_at, describe
from narrative_eval.errors import UserError
from narrative_eval.study import STUDIES

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "infilling" / "sample.jsonl"
BENCHMARK = REPO / "data" / "infilling" / "benchmark.csv"
CATALOG = REPO / "experiments" / "configs" / "models.yaml"


def write_config(folder: Path, body: str, name: str = "mine.yaml") -> Path:
    path = folder / name
    path.write_text(body)
    return path


def test_config_outside_the_repo_resolves_catalog_names(tmp_path, monkeypatch):
    """Bug 1: a config in /tmp naming smollm2 used to get an empty catalog ("known: " and nothing)."""
    monkeypatch.chdir(tmp_path)  # not the repo: the catalog is found from the installed package's repository
    path = write_config(tmp_path, f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\njudges: [smollm2-judge]\n")
    config = load_config(path)
    assert config.models[0].id == "smollm2" and config.models[0].weights.startswith("embedded:")
    assert config.judges[0].model.id == "smollm2"


def test_an_explicit_catalog_wins_and_a_missing_one_is_an_error(tmp_path):
    catalog = write_config(tmp_path, "models:\n  tiny: {backend: llama_cpp, weights: 'embedded:smollm2-135m-instruct'}\n",
                           "catalog.yaml")
    path = write_config(tmp_path, f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [tiny]\n")
    assert load_config(path, catalog=catalog).models[0].id == "tiny"
    with pytest.raises(UserError, match="catalog not found"):
        load_config(path, catalog=tmp_path / "absent.yaml")


def test_every_config_problem_is_reported_with_its_line(tmp_path):
    path = write_config(tmp_path, f"""study: infilling
sweep: s
data: {SAMPLE}
models:
  - smollm2
  - nope-1
seeds: seven
generation: {{temprature: 0.3}}
""")
    with pytest.raises(UserError) as caught:
        load_config(path, ["judges=[nope-judge]"], catalog=CATALOG)
    problems = caught.value.problems
    assert f"{path}:6: model 'nope-1' is not in the model catalog" in problems[0]
    assert any(p.startswith("--set judges=[nope-judge]: judge 'nope-judge'") for p in problems)
    assert any(p.startswith(f"{path}:7: seeds") for p in problems)
    assert any(p.startswith(f"{path}:8: unknown key 'generation.temprature' (did you mean 'temperature'?)")
               for p in problems), problems


def test_yaml_syntax_and_set_syntax_errors_are_located(tmp_path):
    path = write_config(tmp_path, "study: infilling\nmodels: [smollm2\nsweep: x\n")
    with pytest.raises(UserError, match=rf"{path}:\d+: invalid YAML"):
        load_config(path)
    good = write_config(tmp_path, f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n", "good.yaml")
    with pytest.raises(UserError) as caught:
        load_config(good, catalog=CATALOG, overrides=["no-equals-sign", "seeds=[1", "study.x=1"])
    assert len(caught.value.problems) == 3
    with pytest.raises(UserError):
        parse_override("=5")


def test_same_sweep_name_on_other_data_gets_its_own_report_folder(tmp_path):
    """Bug 6: a second sweep of one name on other data (--data) used to overwrite reports/<sweep>/ of the first."""
    body = f"study: infilling\nsweep: same-name\ndata: {SAMPLE}\nmodels: [smollm2]\nreport_dir: {tmp_path}/reports/{{sweep}}\n"
    path = write_config(tmp_path, body)
    first = load_config(path).resolved_report_dir()
    first.mkdir(parents=True, exist_ok=True)  # the sweep writes its tables there
    (first / "main.csv").write_text("first sweep's table\n")
    assert load_config(path).resolved_report_dir() == first  # a rerun on the same data resumes into its folder
    second = load_config(path, data=str(BENCHMARK)).resolved_report_dir()
    assert second != first and second.parent == first.parent
    assert (first / "main.csv").read_text() == "first sweep's table\n"
    assert load_config(path, data=str(BENCHMARK)).resolved_report_dir() == second


def test_a_report_reads_only_the_cells_on_its_data(tmp_path):
    """Bug 6, second half: the report of a sweep name reused on other data mixed the cells of both data files."""
    from narrative_eval import tracking
    from narrative_eval.sweep import expand_grid

    body = f"study: infilling\nsweep: two-data\ndata: {SAMPLE}\nmodels: [smollm2]\nprompt_settings: [L0]\njudges: []\n"
    path = write_config(tmp_path, body)
    on_sample = expand_grid(load_config(path))[0]
    on_benchmark = expand_grid(load_config(path, data=str(BENCHMARK)))[0]
    assert on_sample.data_sha256 != on_benchmark.data_sha256
    parent = tracking.start_sweep_run("infilling", "two-data", {})
    for cell in (on_sample, on_benchmark):
        tracking.end_run(tracking.start_cell_run("infilling", cell, parent), "FINISHED")
    tracking.end_run(parent, "FINISHED")
    mine = tracking.report_cell_runs("infilling", "two-data", on_benchmark.data_sha256)
    assert list(mine["params.data_path"]) == [str(BENCHMARK)]
    with pytest.raises(UserError, match="2 different data files.*--data FILE") as caught:
        tracking.report_cell_runs("infilling", "two-data")
    assert str(SAMPLE) in str(caught.value) and str(BENCHMARK) in str(caught.value)


def test_seeds_limit_and_subset_that_would_run_nothing_or_not_reproducibly_are_all_reported(tmp_path):
    """`seeds: []` and `--limit 0` used to run nothing without a word, and `seeds: [-1]` was accepted."""
    path = write_config(tmp_path, f"""study: infilling
sweep: s
data: {SAMPLE}
models: [smollm2]
seeds: [0, -1, 4294967295, 4294967296]
subset: {{fraction: 0}}
judges:
  - {{id: j, model: smollm2, seed: -1}}
  - {{id: k, model: smollm2, seed: 4294967293, max_retries: 2}}
""")
    with pytest.raises(UserError) as caught:
        load_config(path, limit=0, catalog=CATALOG)
    problems = caught.value.problems
    assert len(problems) == 4, problems
    assert "--limit 0: limit: must be a positive integer (how many instances or tasks to keep), got 0" in problems
    assert any(p.startswith(f"{path}:5: seeds: must be integers from 0 to 4294967294 (llama.cpp takes -1 and "
                            "4294967295 as 'a random seed'") and p.endswith("got -1, 4294967295, 4294967296")
               for p in problems), problems
    assert any(p.startswith(f"{path}:6: subset: fraction must be more than 0 and at most 1") for p in problems)
    assert any(p.startswith(f"{path}:7: judges: judge 'j' has seed -1; judge 'k' has seed 4294967293 "
                            "(its last retry 4294967295)") for p in problems), problems


def test_an_empty_seed_list_and_a_negative_limit_name_the_flags_that_gave_them(tmp_path):
    path = write_config(tmp_path, f"study: infilling\nsweep: s\ndata: {SAMPLE}\nlimit: 12\nmodels: [smollm2]\n")
    with pytest.raises(UserError) as caught:
        load_config(path, ["seeds=[3]", "seeds=[]"], limit=-2, catalog=CATALOG)
    # The last --set of a key is the one in effect, so it is the one named.
    assert caught.value.problems == [
        "--limit -2: limit: must be a positive integer (how many instances or tasks to keep), got -2",
        "--set seeds=[]: seeds: a cell needs at least one seed (e.g. seeds: [0])",
    ]


def test_the_largest_seed_llama_cpp_keeps_and_a_limit_of_one_are_accepted(tmp_path):
    path = write_config(tmp_path, f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
                                  "seeds: [0, 4294967294]\njudges: [{id: j, model: smollm2, seed: 4294967292}]\n")
    config = load_config(path, limit=1, catalog=CATALOG)
    assert config.seeds == [0, 4294967294] and config.limit == 1 and config.judges[0].seed == 4294967292


def test_a_grid_name_that_is_not_the_studys_is_an_error_naming_the_key_and_the_studys_names(tmp_path):
    """`--set conditions=[sharded]` on an infilling sweep used to run six cells labelled "sharded"."""
    infilling = write_config(tmp_path, f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
                                       "prompt_settings:\n  - L2\n  - system\n")
    with pytest.raises(UserError) as caught:
        load_config(infilling, ["conditions=[standard, sharded]"], catalog=CATALOG)
    assert caught.value.problems == [
        f"{infilling}:7: prompt_settings.1: 'system' is not a prompt setting of the infilling study (its prompt "
        "settings: L0, L1, L2, L3, L4, abductive, causal, cot, counterfactual)",
        "--set conditions=[standard, sharded]: conditions.1: 'sharded' is not a condition of the infilling study (its "
        "conditions: standard)"]
    incremental = write_config(tmp_path, f"study: incremental\nsweep: s\ndata: {REPO / 'data/creative/tasks.json'}\n"
                                         "models: [smollm2]\nprompt_settings: [L2]\nconditions: [full, standard]\n",
                               "incremental.yaml")
    with pytest.raises(UserError) as caught:
        load_config(incremental, catalog=CATALOG)
    assert [problem.split(" (its ")[0] for problem in caught.value.problems] == [
        f"{incremental}:5: prompt_settings.0: 'L2' is not a prompt setting of the incremental-delivery study",
        f"{incremental}:6: conditions.1: 'standard' is not a condition of the incremental-delivery study"]
    assert "(its conditions: full, sharded, recap, snowball)" in caught.value.problems[1]


def test_grid_keys_left_out_take_the_studys_defaults_and_spec_hashes_stay(tmp_path):
    body = f"sweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
    infilling = load_config(write_config(tmp_path, "study: infilling\n" + body), catalog=CATALOG)
    assert (infilling.prompt_settings, infilling.conditions) == (["L2"], ["standard"])
    incremental = load_config(write_config(tmp_path, "study: creative\n" + body, "c.yaml"), catalog=CATALOG)
    assert (incremental.prompt_settings, incremental.conditions) == (["default"], ["full", "sharded"])
    # A config that leaves them out makes the cells (and spec hashes) of one that spells out what the generic config
    # used to default to, so a sweep finished then is skipped now.
    from narrative_eval.sweep import expand_grid

    spelled = load_config(write_config(tmp_path, "study: infilling\nprompt_settings: [L2]\nconditions: [standard]\n"
                                                 + body, "spelled.yaml"), catalog=CATALOG)
    assert [cell.spec_hash for cell in expand_grid(infilling)] == [cell.spec_hash for cell in expand_grid(spelled)]


def test_a_list_of_metric_names_means_the_names_mapping(tmp_path):
    """`metrics: [rouge1]` used to fail with "Input should be a valid dictionary or instance of MetricsSpec"."""
    from narrative_eval.sweep import expand_grid

    body = f"study: infilling\nsweep: s\ndata: {SAMPLE}\nmodels: [smollm2]\n"
    as_list = load_config(write_config(tmp_path, body + "metrics: [rouge1, chrf]\n"), catalog=CATALOG)
    as_mapping = load_config(write_config(tmp_path, body + "metrics: {names: [rouge1, chrf]}\n", "m.yaml"),
                             catalog=CATALOG)
    assert as_list.metrics == as_mapping.metrics and as_list.metrics.names == ("rouge1", "chrf")
    assert expand_grid(as_list)[0].spec_hash == expand_grid(as_mapping)[0].spec_hash
    # An unknown name is reported at its line, with the registered ones.
    with pytest.raises(UserError) as caught:
        load_config(write_config(tmp_path, body + "metrics: [rouge1, rogue2]\n", "typo.yaml"), catalog=CATALOG)
    assert caught.value.problems[0].startswith(f"{tmp_path / 'typo.yaml'}:5: metrics.names.1: unknown metric 'rogue2' "
                                               "(registered metrics: bertscore, rouge1, meteor, chrf, semf1")


CLASS_NAME = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*|instance of")
"""An internal type name (ModelSpec, MetricsSpec, GenerationParams...) or pydantic's words around one."""


@pytest.mark.parametrize("config", ["quickstart.yaml", "incremental_embedded.yaml"])
def test_a_value_of_the_wrong_shape_names_the_key_and_the_shape_never_a_type_name(config):
    """Every key of the config and of the study's section, and the nested keys, given a value of the wrong kind."""
    path = REPO / "experiments" / "configs" / config
    section = STUDIES.get(load_config(path).study).config_section
    keys = [*SweepConfig.model_fields, *section.model_fields, "generation.temperature", "subset.fraction",
            "judge_checks.items", "metrics.names"]
    keys.remove("section")
    for key in keys:
        shape = describe(annotation_at(SweepConfig if key in SweepConfig.model_fields or "." in key else section,
                                       tuple(key.split("."))))
        wrong = "5" if shape.startswith(("a list", "a mapping")) or "or a mapping" in shape else "{k: 1}"
        with pytest.raises(UserError) as caught:
            load_config(path, [f"{key}={wrong}"], catalog=CATALOG)
        problem, *others = caught.value.problems  # (a study that is not one also leaves its section's keys unknown)
        assert problem.startswith(f"--set {key}={wrong}: {key}: expected {shape}; got "), problem
        assert key == "study" or not others, others
        assert not CLASS_NAME.search(problem), problem
