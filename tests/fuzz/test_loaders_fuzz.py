"""Fuzzed input files: every loader returns records or a listed, located error, whatever the bytes."""

from __future__ import annotations

import json
from pathlib import Path

from fuzz_inputs import FEW, load_bytes, mutations, texts
from hypothesis import example, given
from hypothesis import strategies as st

from narrative_eval.data import load_instances
from narrative_eval.errors import DataErrors
from narrative_eval.studies.incremental.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]
SAMPLE_JSONL = (REPO / "data" / "infilling" / "sample.jsonl").read_bytes()
SAMPLE_CSV = b"\n".join((REPO / "data" / "infilling" / "benchmark.csv").read_bytes().split(b"\n")[:6])
TASKS = json.loads((REPO / "data" / "creative" / "tasks.json").read_text())[:2]
TASKS_JSON = json.dumps(TASKS, indent=2).encode()
CONSTRAINTS = b"\n".join((REPO / "data" / "creative" / "constraints.jsonl").read_bytes().split(b"\n")[:2])


def instances(name: str):
    return lambda paths: load_instances(paths[name])


def tasks(paths):
    return load_tasks(paths["tasks.json"], paths["constraints.jsonl"])


@FEW
@given(data=st.binary(max_size=2048), suffix=st.sampled_from(["in.csv", "in.jsonl"]))
@example(data=b"\xff\xfe" + "dataset,ref_id\n".encode("utf-16-le"), suffix="in.csv")
@example(data=b"[" * 100_000, suffix="in.jsonl")
@example(data=b"a,b\x00c\n", suffix="in.csv")
def test_instance_loader_on_arbitrary_bytes(data, suffix):
    load_bytes({suffix: data}, instances(suffix))


@FEW
@given(data=texts, suffix=st.sampled_from(["in.csv", "in.jsonl"]))
def test_instance_loader_on_arbitrary_text(data, suffix):
    load_bytes({suffix: data.encode("utf-8")}, instances(suffix))


@FEW
@given(st.data())
def test_instance_loader_on_mutated_valid_files(data):
    name, original = data.draw(st.sampled_from([("in.csv", SAMPLE_CSV), ("in.jsonl", SAMPLE_JSONL)]))
    loaded = load_bytes({name: data.draw(mutations(original))}, instances(name))
    if not isinstance(loaded, DataErrors):
        assert all(inst.problem.count("___") >= 1 and 1 <= inst.n <= 3 for inst in loaded)


def test_valid_files_load_unchanged():
    """The mutation tests start from files that load: their errors come from the edits."""
    assert len(load_bytes({"in.jsonl": SAMPLE_JSONL}, instances("in.jsonl"))) == 12
    assert len(load_bytes({"in.csv": SAMPLE_CSV}, instances("in.csv"))) == 5
    assert len(load_bytes({"tasks.json": TASKS_JSON, "constraints.jsonl": CONSTRAINTS}, tasks)) == 2


def test_task_loader_on_deeply_nested_json():
    """Found by fuzzing: brackets nested past the JSON decoder's recursion limit raised RecursionError."""
    error = load_bytes({"tasks.json": b"[" * 100_000, "constraints.jsonl": CONSTRAINTS}, tasks)
    assert isinstance(error, DataErrors) and "nested too deeply" in error.problems[0]


@FEW
@given(st.data())
def test_task_loader_on_arbitrary_and_mutated_files(data):
    which = data.draw(st.sampled_from(["tasks", "constraints", "both"]))
    tasks_json = data.draw(st.one_of(st.binary(max_size=512), mutations(TASKS_JSON))) if which != "constraints" else TASKS_JSON
    constraints = data.draw(st.one_of(st.binary(max_size=512), mutations(CONSTRAINTS))) if which != "tasks" else CONSTRAINTS
    load_bytes({"tasks.json": tasks_json, "constraints.jsonl": constraints}, tasks)
