"""Config problems as a user reads them: `config.yaml:12: unknown key 'sede' (did you mean 'seeds'?)`.

pydantic reports a location path (``models.0.backend``) and a message meant for developers; here each
becomes one line with the YAML line it points at (or the --set that supplied it).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

Location = tuple[Any, ...]


def yaml_error(path: str | Path, error: yaml.YAMLError) -> str:
    """A YAML syntax error as file:line: problem."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{where}: invalid YAML: {problem}"


def _fields_at(model: type[BaseModel] | None, loc: Location) -> list[str]:
    """Field names of the (nested) model a location ends in, for 'did you mean' hints."""
    for part in loc[:-1]:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return list(model.model_fields) if model is not None else []


def _message(error: dict[str, Any], model: type[BaseModel]) -> str:
    loc = tuple(error["loc"])
    dotted = ".".join(str(part) for part in loc)
    if error["type"] == "extra_forbidden":
        hint = difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc), n=1)
        return f"unknown key {dotted!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    if error["type"] == "missing":
        return f"missing required key {dotted!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{dotted}: {message}" if dotted else message


def config_problems(error: ValidationError, model: type[BaseModel]) -> list[tuple[Location, str]]:
    """(location, readable message) for every schema problem of a config."""
    return [(tuple(e["loc"]), _message(e, model)) for e in error.errors()]


def _node_line(text: str, loc: Location) -> int | None:
    """1-based line of the deepest YAML node the location reaches (the key's line for a mapping entry)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def locate(path: Path, text: str, loc: Location, message: str, overrides: list[str],
           flags: dict[str, str] | None = None) -> str:
    """'file:line: message', '--set KEY=...: message' when an override supplied the value, or '--limit 0: message'
    when a command-line flag did (flags: top-level key -> the flag as typed)."""
    dotted = ".".join(str(part) for part in loc)
    if loc and flags and str(loc[0]) in flags:
        return f"{flags[str(loc[0])]}: {message}"
    for override in reversed(overrides):  # the last --set of a key is the value in effect
        key = override.partition("=")[0].strip()
        # The override set this value, a part of it, or (subset.fraction for a problem with subset) a value inside it.
        if key and (dotted == key or dotted.startswith(key + ".") or (dotted and key.startswith(dotted + "."))):
            return f"--set {override}: {message}"
    line = _node_line(text, loc) if loc else None
    return f"{path}:{line}: {message}" if line else f"{path}: {message}"
