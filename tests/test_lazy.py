"""Heavy dependencies are imported by the step that uses them: a lazy module imports on first use, and the sweep
command's `--help`, `--list` and `--dry-run` import none of MLflow, pandas or scipy.stats (their latency is measured by
bench/command_latency.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from narrative_eval.lazy import lazy_module

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("mlflow", "pandas", "scipy.stats", "krippendorff", "torch", "transformers")


def test_a_lazy_module_imports_on_first_use_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_probe_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = lazy_module("lazy_probe_module")
    assert "lazy_probe_module" not in sys.modules
    assert probe.VALUE == 42
    assert sys.modules["lazy_probe_module"].VALUE == 42
    assert lazy_module("lazy_probe_module") is sys.modules["lazy_probe_module"]
    monkeypatch.delitem(sys.modules, "lazy_probe_module")


def test_a_missing_module_fails_on_first_use_with_its_name():
    missing = lazy_module("no_such_module_anywhere")
    try:
        missing.anything  # noqa: B018
    except ModuleNotFoundError as error:
        assert error.name == "no_such_module_anywhere"
    else:
        raise AssertionError("a missing module imported")


def heavy_imported_by(*argv: str) -> list[str]:
    script = ("import runpy, sys\nsys.argv = ['experiments.sweep', *sys.argv[1:]]\n"
              "try:\n    runpy.run_module('experiments.sweep', run_name='__main__')\nexcept SystemExit as done:\n"
              "    assert not done.code, done.code\n"
              f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script, *argv], cwd=REPO, capture_output=True, text=True, check=True)
    return eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - a list literal this test printed


def test_commands_that_run_nothing_import_no_heavy_library():
    assert heavy_imported_by("--help") == []
    assert heavy_imported_by("--list") == []
    assert heavy_imported_by("--config", "experiments/configs/quickstart.yaml", "--dry-run") == []
