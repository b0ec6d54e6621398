"""The Registry: one place per kind of name, with aliases, origins and clear errors."""

from __future__ import annotations

import pytest

from experiments.sweep import all_registries
from narrative_eval import registry
from narrative_eval.registry import Registry, UnknownName


def test_decorator_registers_where_defined_with_aliases_and_meta():
    things = Registry("thing")

    @things("alpha", aliases=("a", "first"), weight=2)
    def alpha():
        return "A"

    assert things.names() == ("alpha",)
    assert things.get("a") is alpha and things.canonical("first") == "alpha"
    entry = things.entry("alpha")
    assert entry.origin == __name__ and entry.meta["weight"] == 2
    assert "first" in things and "beta" not in things


def test_unknown_name_lists_what_exists():
    things = Registry("thing")
    things.add("alpha", 1, origin="here")
    things.add("beta", 2, origin="here")
    with pytest.raises(UnknownName, match=r"unknown thing 'gamma'; registered: alpha, beta"):
        things.get("gamma")


def test_a_name_taken_by_another_origin_is_refused_and_remove_frees_it():
    things = Registry("thing")
    things.add("alpha", 1, origin="one.py")
    things.add("alpha", 1, origin="one.py")  # the same module imported again is fine
    with pytest.raises(ValueError, match="registered twice: by one.py and by two.py"):
        things.add("alpha", 2, origin="two.py", aliases=("a",))
    things.remove("alpha")
    things.add("alpha", 2, origin="two.py")
    assert things.get("alpha") == 2


def test_a_plugin_registering_before_the_project_is_listed_after_it():
    things = Registry("thing")
    registry._plugin_origin.name = "plugin demo"  # as load_plugins sets it while the plugin's module imports
    try:
        things.add("early", 0, origin="demo.py")
    finally:
        registry._plugin_origin.name = None
    things.add("alpha", 1, origin="one.py")
    things.add("beta", 2, origin="one.py")
    assert things.names() == ("alpha", "beta", "early")
    assert [entry.plugin for entry in things.entries()] == [False, False, True]
    assert things.entry("early").origin == "plugin demo: demo.py"


def test_project_registries_hold_the_studies_names():
    registries = all_registries()
    assert set(registries) == {"study", "metric", "backend", "rubric", "prompt setting", "condition", "executor"}
    studies = registries["study"]
    for alias in ("incremental", "creative", "creative-integrity"):
        assert studies.canonical(alias) == "incremental-delivery"
    assert studies.entry("infilling").meta["experiment"] == "infilling"
    # Every condition the score-record format allows is registered, 'full' first (the reference).
    assert registries["condition"].names()[0] == "full"
    assert {"L0", "L1", "L2", "L3", "L4", "default"} <= set(registries["prompt setting"].names())
    assert registries["backend"].entry("llama_cpp").origin == "narrative_eval.backends.llama_cpp"
