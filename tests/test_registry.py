"""The Registry: one place per kind of name, with aliases, origins and clear errors."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from experiments.sweep import all_registries
from experiments.sweep import main as sweep_main
from narrative_eval import registry
from narrative_eval.errors import cli_main
from narrative_eval.registry import Registry, UnknownName

REPO = Path(__file__).resolve().parents[1]


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


def test_the_project_studies_and_conditions_come_through_its_own_entry_points():
    """Built-in studies register exactly as a plugin's do: through the entry points pyproject.toml declares (an
    installation whose metadata lacks them needs reinstalling), never through module names in the library."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][registry.PLUGIN_GROUP]
    installed = {point.name: point.value for point in importlib.metadata.entry_points(group=registry.PLUGIN_GROUP)
                 if registry.is_project_entry_point(point)}
    assert installed == declared, f"the installed entry points are not pyproject.toml's: {registry.REINSTALL}"
    studies, conditions = all_registries()["study"], all_registries()["condition"]
    assert studies.names()[:2] == ("infilling", "incremental-delivery")  # the entry points' names order them: the default study first
    assert {studies.entry(name).origin for name in studies.names()[:2]} == {
        "narrative_eval.studies.infilling.study", "narrative_eval.studies.incremental.study"}
    assert not any(studies.entry(name).plugin for name in studies.names()[:2])
    assert conditions.entry("sharded").origin == "narrative_eval.studies.incremental.conditions"
    # No module of the library outside the studies names a study's package (the layer contract cannot see strings).
    library = REPO / "platform" / "narrative_eval"
    naming = [str(path.relative_to(library)) for path in library.rglob("*.py")
              if "studies" not in path.relative_to(library).parts and "narrative_eval.studies" in path.read_text()]
    assert naming == []


@pytest.fixture
def reloading_plugins(monkeypatch):
    """Entry points read afresh by the next lookup, from `entry_points` as the test sets it (the real state comes
    back after the test: its registries stay filled)."""

    def use(points: list[importlib.metadata.EntryPoint]) -> None:
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group: points if group == registry.PLUGIN_GROUP else [])
        for name, value in (("_plugins_loaded", False), ("_project_modules", registry._project_modules)):
            monkeypatch.setattr(registry, name, value)

    return use


def _own_points() -> list[importlib.metadata.EntryPoint]:
    return [point for point in importlib.metadata.entry_points(group=registry.PLUGIN_GROUP)
            if registry.is_project_entry_point(point)]


def test_a_broken_plugin_is_an_error_line_naming_its_entry_point_every_time(reloading_plugins, capsys):
    broken = importlib.metadata.EntryPoint("broken", "narrative_eval_no_such_plugin", registry.PLUGIN_GROUP)
    reloading_plugins([*_own_points(), broken])
    assert cli_main(sweep_main, ["--list"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: entry point 'broken' = 'narrative_eval_no_such_plugin' of an unknown distribution "
                            f"(group {registry.PLUGIN_GROUP}) failed to load: ModuleNotFoundError: No module named "
                            "'narrative_eval_no_such_plugin'; fix the plugin or uninstall it"), error
    # Raised again by every later listing or lookup of a name not yet known, not only the first: nothing goes on
    # with half-filled registries.
    for look_up in (lambda: all_registries()["study"].names(), lambda: "a-plugin-study" in all_registries()["study"]):
        with pytest.raises(registry.PluginError, match="'broken'"):
            look_up()


def test_missing_project_entry_points_say_to_reinstall(reloading_plugins):
    reloading_plugins([])
    with pytest.raises(registry.PluginError, match=r"no entry point of the group narrative_eval\.plugins names a "
                                                  r"module of narrative_eval.*reinstall the project"):
        all_registries()["condition"].names()
    stale = importlib.metadata.EntryPoint("old-study", "narrative_eval.studies.gone", registry.PLUGIN_GROUP)
    reloading_plugins([*_own_points(), stale])
    with pytest.raises(registry.PluginError, match=r"'old-study'.*names a module that is not there "
                                                  r"\(narrative_eval\.studies\.gone\).*reinstall"):
        registry.load_plugins()
