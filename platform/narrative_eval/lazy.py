"""Heavy dependencies imported by the step that first uses them.

Every command imports every study's declaration (to fill the registries), and a declaration imports the runtime
that runs it. MLflow takes 1.5-2 s to import (its GenAI modules most of it) and pandas 0.5 s, which made
`python -m experiments.sweep --help`, `--list` and `--dry-run` wait seconds for libraries they never call. A module
that needs one of them names it at its top as `mlflow = lazy_module("mlflow")`: the name reads like the import it
stands for, and the real import happens on the first attribute looked up (so a sweep pays it when it opens the store,
a report when it builds its first frame). Type annotations stay strings (`from __future__ import annotations`).
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any

_lock = threading.Lock()


class LazyModule(ModuleType):
    """Stands for module `name` until an attribute is looked up, then forwards every look-up to the real module."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_loaded"] = None

    def _load(self) -> ModuleType:
        loaded = self.__dict__["_loaded"]
        if loaded is None:
            with _lock:  # importlib serialises the import itself; the lock keeps the cached reference consistent
                loaded = self.__dict__["_loaded"] or importlib.import_module(self.__name__)
                self.__dict__["_loaded"] = loaded
        return loaded

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._load(), attribute)

    def __dir__(self) -> list[str]:
        return dir(self._load())


def lazy_module(name: str) -> ModuleType:
    """The module `name` if it is already imported, else a stand-in that imports it on first use."""
    return sys.modules.get(name) or LazyModule(name)
