"""Registries: the one place where each kind of name (metric, backend, rubric, ...) is known.

A thing registers itself where it is defined, with a decorator (`@metric("chrf")`) or, for data files,
by being found in its folder. Installed packages add more through the entry-point group
`narrative_eval.plugins`: each entry point names a module (imported) or a callable (called), whose
registrations are recorded with the plugin as their origin. Config validation, reports, the app and
the tests read names from here and nowhere else.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

PLUGIN_GROUP = "narrative_eval.plugins"
"""Entry-point group through which installed packages register extensions."""


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


_plugin_origin = threading.local()
_plugins_lock = threading.RLock()
_plugins_loaded = False


def current_plugin() -> str | None:
    """The plugin being loaded right now, if any (its registrations carry it as their origin)."""
    return getattr(_plugin_origin, "name", None)


def load_plugins(force: bool = False) -> list[str]:
    """Import every entry point of the plugin group once per process; returns their names."""
    global _plugins_loaded
    with _plugins_lock:
        if _plugins_loaded and not force:
            return []
        _plugins_loaded = True
        loaded = []
        for point in importlib.metadata.entry_points(group=PLUGIN_GROUP):
            package = point.dist.name if point.dist is not None else point.value
            _plugin_origin.name = f"plugin {package}"
            try:
                target = point.load()
                if callable(target):
                    target()
            finally:
                _plugin_origin.name = None
            loaded.append(point.name)
        return loaded


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
        entry = Entry(name, target, where, tuple(aliases), dict(meta), plugin=plugin is not None)
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

    def _ensure(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            for module in self._modules:
                importlib.import_module(module)
            if self._discover is not None:
                self._discover(self)
            self._ready = True
        load_plugins()

    def canonical(self, name: str) -> str:
        """The canonical name for `name` or one of its aliases; UnknownName lists what exists."""
        self._ensure()
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
        self._ensure()
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
        return sorted(self._entries.values(), key=lambda entry: entry.plugin)

    def remove(self, name: str) -> None:
        """Forget a name and its aliases (tests that register temporary entries clean up with this)."""
        with self._lock:
            entry = self._entries.pop(name, None)
            for alias in entry.aliases if entry else ():
                self._aliases.pop(alias, None)
