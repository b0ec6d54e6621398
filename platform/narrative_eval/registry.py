"""Registries: the one place where each kind of name (metric, backend, rubric, ...) is known.

A thing registers itself where it is defined, with a decorator (`@metric("chrf")`) or, for data files,
by being found in its folder. Installed packages add more through the entry-point group
`narrative_eval.plugins`: each entry point names a module (imported) or a callable (called), whose
registrations are recorded with the plugin as their origin. The project's own studies (and the conditions
their packages define) come the same way, through its own entry points (pyproject.toml), loaded before any
plugin's and recorded under their modules. Config validation, reports, the app and the tests read names from
here and nowhere else.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from narrative_eval.errors import UserError

T = TypeVar("T")

PLUGIN_GROUP = "narrative_eval.plugins"
"""Entry-point group through which installed packages register extensions (the project's own studies too)."""

PROJECT_PACKAGE = __name__.partition(".")[0]
"""The project's import package: an entry point naming a module inside it is the project's own, not a plugin."""

REINSTALL = "reinstall the project (`make install`, or `pip install -e .` in the repository)"
"""What fixes the project's own entry points when the installed metadata does not match the code."""


class UnknownName(ValueError):
    """A name that no registry entry (or alias) carries."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered thing."""

    name: str
    """Canonical name, used in configs, run params and metric keys."""
    target: T
    """The registered object: a class, a function, a file path or a loaded record."""
    origin: str
    """Where it comes from: the defining module or file, prefixed 'plugin <package>: ' for plugins."""
    aliases: tuple[str, ...] = ()
    """Other names accepted in configs and on command lines."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Kind-specific attributes (a metric's in_at_avg, a study's experiment, ...)."""
    plugin: bool = False
    """Registered by a plugin while it loaded."""
    distribution: str | None = None
    """For a plugin's entry, the installed distribution it came from with its version ('my-plugin 0.3.1'): part of
    the spec hash of the cells it makes numbers for (`study.code_versions`)."""


class PluginError(UserError):
    """An entry point of the plugin group that cannot be loaded, or the project's own ones missing: an installation
    problem, said as an `error:` line (`--debug` shows the traceback)."""


_plugin_origin = threading.local()
_plugins_lock = threading.RLock()
_plugins_loaded: bool | PluginError = False
"""Whether this process loaded its entry points (or is loading them), or the error that loading raised: raised again
by every later lookup."""
_project_modules: tuple[str, ...] = ()
"""The modules the project's own entry points name, in their order: the order their entries are listed in."""


def current_plugin() -> str | None:
    """The plugin being loaded right now, if any (its registrations carry it as their origin)."""
    return getattr(_plugin_origin, "name", None)


def is_project_entry_point(point: importlib.metadata.EntryPoint) -> bool:
    """Whether an entry point names a module of the project itself (its studies) rather than a plugin's."""
    return point.module == PROJECT_PACKAGE or point.module.startswith(PROJECT_PACKAGE + ".")


def _describe(point: importlib.metadata.EntryPoint) -> str:
    package = point.dist.name if point.dist is not None else "an unknown distribution"
    return f"entry point {point.name!r} = {point.value!r} of {package} (group {PLUGIN_GROUP})"


def _load(point: importlib.metadata.EntryPoint) -> None:
    """Import (or call) one entry point; a plugin's failure, and a project module missing from an installation that
    still names it, become a PluginError. Any other failure of the project's own code is a bug and keeps its type."""
    own = is_project_entry_point(point)
    package = point.dist.name if point.dist is not None else point.value
    _plugin_origin.name = None if own else f"plugin {package}"
    _plugin_origin.distribution = None if own or point.dist is None else f"{package} {point.dist.version}"
    try:
        target = point.load()
        if callable(target):
            target()
    except Exception as error:
        if not own:
            raise PluginError(f"{_describe(point)} failed to load: {type(error).__name__}: {error}; fix the plugin or "
                              "uninstall it") from error
        if isinstance(error, ModuleNotFoundError) and error.name is not None and point.module.startswith(error.name):
            raise PluginError(f"{_describe(point)} names a module that is not there ({error.name}): the installed "
                              f"metadata is older than the code; {REINSTALL}") from error
        raise
    finally:
        _plugin_origin.name = _plugin_origin.distribution = None


def _project_rank(origin: str) -> int:
    """Where an entry registered from `origin` (a module, or a data file in a module's folder) comes in the project's
    entry points (-1: none of theirs)."""
    where = origin.replace("\\", "/")
    return next((rank for rank, module in enumerate(_project_modules)
                 if origin == module or origin.startswith(module + ".")
                 or f"/{module.replace('.', '/')}/" in where), -1)


def load_plugins(force: bool = False) -> list[str]:
    """Load every entry point of the plugin group once per process, the project's own first (in the order
    of their names: installers sort them anyway), then the plugins' by package; returns their names. A failure is raised again on
    every later call, so no lookup goes on with half-filled registries."""
    global _plugins_loaded, _project_modules
    with _plugins_lock:
        if isinstance(_plugins_loaded, PluginError):
            raise _plugins_loaded
        if _plugins_loaded and not force:
            return []  # loaded, or loading in this thread (a plugin's module looks a name up while it imports)
        _plugins_loaded = True
        try:
            points = list(importlib.metadata.entry_points(group=PLUGIN_GROUP))
            own = sorted((point for point in points if is_project_entry_point(point)), key=lambda point: point.name)
            _project_modules = tuple(point.module for point in own)
            if not own:
                raise PluginError(f"no entry point of the group {PLUGIN_GROUP} names a module of {PROJECT_PACKAGE}, "
                                  "so its own studies are not registered: the installed metadata is older than the "
                                  f"code; {REINSTALL}")
            plugins = sorted((p for p in points if p not in own), key=lambda p: (p.dist.name if p.dist else "", p.name))
            for point in own + plugins:
                _load(point)
        except PluginError as error:
            _plugins_loaded = error
            raise
        return [point.name for point in own + plugins]


class Registry(Generic[T]):
    """Names of one kind, with their targets, aliases and origins.

    `modules` are the project's own modules that register entries of this kind when imported; they are
    imported on first use, so an optional engine's module is read only when its name is looked up.
    """

    def __init__(self, kind: str, modules: Iterable[str] = (), discover: Callable[[Registry[T]], None] | None = None):
        self.kind = kind
        self._modules = tuple(modules)
        self._discover = discover
        self._entries: dict[str, Entry[T]] = {}
        self._aliases: dict[str, str] = {}
        self._lock = threading.RLock()
        self._ready = False

    # ------------------------------------------------------------------ registering

    def add(self, name: str, target: T, *, origin: str | None = None, aliases: Iterable[str] = (), **meta: Any) -> Entry[T]:
        """Register `target` under `name`; a name taken by another origin is an error."""
        plugin = current_plugin()
        where = origin or getattr(target, "__module__", None) or "?"
        if plugin:
            where = f"{plugin}: {where}"
        distribution = getattr(_plugin_origin, "distribution", None) if plugin else None
        entry = Entry(name, target, where, tuple(aliases), dict(meta), plugin=plugin is not None,
                      distribution=distribution)
        with self._lock:
            previous = self._entries.get(name) or self._entries.get(self._aliases.get(name, ""))
            if previous is not None and previous.origin != entry.origin:
                raise ValueError(f"{self.kind} {name!r} is registered twice: by {previous.origin} and by {entry.origin}")
            self._entries[name] = entry
            for alias in entry.aliases:
                self._aliases[alias] = name
        return entry

    def __call__(self, name: str, *, aliases: Iterable[str] = (), **meta: Any) -> Callable[[T], T]:
        """Decorator form of `add`: `@registry("name", key=value)` above a class or function."""

        def register(target: T) -> T:
            self.add(name, target, aliases=aliases, **meta)
            return target

        return register

    # ------------------------------------------------------------------ looking up

    def _ensure(self, name: str | None = None) -> None:
        """Import the project's modules of this kind once; then load the entry points (the project's studies, the
        plugins) unless `name` is already known. A name found without them needs none of them: a lookup made while a
        module imports (a rubric's dimensions read at import) must not import the studies, which import that module."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    for module in self._modules:
                        importlib.import_module(module)
                    if self._discover is not None:
                        self._discover(self)
                    self._ready = True
        if name is not None and (name in self._entries or name in self._aliases):
            return
        load_plugins()

    def canonical(self, name: str) -> str:
        """The canonical name for `name` or one of its aliases; UnknownName lists what exists."""
        self._ensure(name)
        if name in self._entries:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise UnknownName(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names()) or '(none)'}")

    def entry(self, name: str) -> Entry[T]:
        """The entry for a name or alias."""
        return self._entries[self.canonical(name)]

    def get(self, name: str) -> T:
        """The registered target for a name or alias."""
        return self.entry(name).target

    def __contains__(self, name: object) -> bool:
        self._ensure(name if isinstance(name, str) else None)
        return name in self._entries or name in self._aliases

    def __bool__(self) -> bool:
        return True  # a registry is a thing, not a collection that may be empty: `registry or default` must not load it

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def names(self) -> tuple[str, ...]:
        """Canonical names: the project's own in registration order, then the plugins'."""
        return tuple(entry.name for entry in self.entries())

    def entries(self) -> list[Entry[T]]:
        """Every entry: the project's own in registration order, then the plugins'."""
        self._ensure()
        # Plugins load on the first lookup of any registry, which may come while the project's own modules of
        # another one are still importing: sorted, a plugin never goes before them (nor becomes a default, the first).
        # Likewise the project's studies register in whatever order their packages happen to be imported: sorted
        # by the order of its entry points.
        return sorted(self._entries.values(), key=lambda entry: (entry.plugin, _project_rank(entry.origin)))

    def remove(self, name: str) -> None:
        """Forget a name and its aliases (tests that register temporary entries clean up with this)."""
        with self._lock:
            entry = self._entries.pop(name, None)
            for alias in entry.aliases if entry else ():
                self._aliases.pop(alias, None)
