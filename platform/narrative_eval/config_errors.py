"""Config problems as a user reads them: `config.yaml:12: unknown key 'sede' (did you mean 'seeds'?)`.

pydantic reports a location path (``models.0.backend``) and a message meant for developers; here each
becomes one line with the YAML line it points at (or the --set that supplied it), saying the shape the key
expects in the config's words ("a list of strings", "a mapping with keys ..."), never a class name. The same
words describe each key's type in the generated config reference (docs/config.md).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Location = tuple[Any, ...]


@dataclass(frozen=True)
class Shorthand:
    """`Annotated[T, Shorthand("a list of metric names", "lists of metric names")]`: the key also takes this shorter
    form (a validator of the model expands it), so messages and the config reference name both forms."""

    one: str
    """The shorter form, as a config's reader says it ('a name from the model catalog')."""
    many: str
    """The same, of several ('names from the model catalog')."""


_SCALARS: dict[Any, tuple[str, str]] = {
    str: ("a string", "strings"), int: ("an integer", "integers"), float: ("a number", "numbers"),
    bool: ("true or false", "true/false values"), type(None): ("null", "nulls"), Any: ("any value", "values"),
}


def describe(annotation: Any, plural: bool = False) -> str:
    """An annotation as a config's reader says it: `list[int]` -> 'a list of integers', a model -> 'a mapping with keys
    a, b', `int | None` -> 'an integer or null'."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        shorthand = next((m.many if plural else m.one for m in args[1:] if isinstance(m, Shorthand)), None)
        shape = describe(args[0], plural)
        return f"{shorthand} or {shape}" if shorthand else shape
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe(arg, plural) for arg in args))
    if origin is Literal:
        return "one of " + ", ".join(str(arg) for arg in args)
    if origin in (list, tuple, set, frozenset, Sequence):
        items = [arg for arg in args if arg is not Ellipsis][:1] or [Any]
        return f"{'lists' if plural else 'a list'} of {describe(items[0], plural=True)}"
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        return "mappings" if plural else "a mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"{'mappings' if plural else 'a mapping'} (keys {', '.join(annotation.model_fields)})"
    if annotation in _SCALARS:
        return _SCALARS[annotation][plural]
    return getattr(annotation, "__name__", str(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation may hold at its next level (a list's items, a union's members, Annotated's type)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _models_in(args[0])
    if origin in (Union, types.UnionType, list, tuple, set, frozenset, Sequence, dict, Mapping):
        return [model for arg in args for model in _models_in(arg)]
    return [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []


def annotation_at(model: type[BaseModel] | None, loc: Location) -> Any:
    """The annotation of the key a location points at (None where the location leaves the models' fields)."""
    annotation: Any = model
    for part in loc:
        if isinstance(part, int):
            args = [arg for arg in get_args(_unwrapped(annotation)) if arg is not Ellipsis and arg is not type(None)]
            if get_origin(_unwrapped(annotation)) in (dict, Mapping):
                args = args[1:]
            if not args:
                return None
            annotation = args[0]
            continue
        fields = [m.model_fields[str(part)] for m in _models_in(annotation) or [annotation]
                  if isinstance(m, type) and issubclass(m, BaseModel) and str(part) in m.model_fields]
        if not fields:
            return None
        # pydantic keeps a field's own Annotated metadata apart from its annotation.
        shorthands = [meta for meta in fields[0].metadata if isinstance(meta, Shorthand)]
        annotation = Annotated[(fields[0].annotation, *shorthands)] if shorthands else fields[0].annotation
    return annotation


def _unwrapped(annotation: Any) -> Any:
    """Annotated[T, ...] -> T, and T | None -> T."""
    if get_origin(annotation) is Annotated:
        return _unwrapped(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _unwrapped(members[0]) if len(members) == 1 else annotation
    return annotation


def shown(value: Any) -> str:
    """A value a config gave, as the message quotes it."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


def attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it in the class body (and its bases'), as one line."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass.__module__.startswith("pydantic"):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        except (OSError, TypeError, IndexError, SyntaxError):
            continue
        statements = getattr(body, "body", [])
        for node, following in zip(statements, statements[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def located(title: str, problems: Sequence[tuple[Location, str]]) -> ValidationError:
    """Problems a validator found, each at its own location of the config, as one error: raised inside a validator,
    pydantic passes its locations on, so each problem is reported at its key's line."""
    return ValidationError.from_exception_data(title, [
        InitErrorDetails(type=PydanticCustomError("config", "{message}", {"message": message}), loc=loc, input=None)
        for loc, message in problems])


def yaml_error(path: str | Path, error: yaml.YAMLError) -> str:
    """A YAML syntax error as file:line: problem."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{where}: invalid YAML: {problem}"


def _fields_at(model: type[BaseModel] | None, loc: Location) -> list[str]:
    """Field names of the (nested) model a location ends in, for 'did you mean' hints."""
    return [name for found in _models_in(annotation_at(model, loc[:-1])) for name in found.model_fields]


_SHAPE_ERRORS = {
    "string_type", "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing", "bool_type",
    "bool_parsing", "list_type", "tuple_type", "set_type", "frozen_set_type", "dict_type", "mapping_type",
    "model_type", "model_attributes_type", "dataclass_type", "is_instance_of", "none_required",
}
"""pydantic's errors for a value of the wrong kind: said as the shape the key expects, from its annotation."""


def _message(loc: Location, error: dict[str, Any], model: type[BaseModel]) -> str:
    dotted = ".".join(str(part) for part in loc)
    if error["type"] == "extra_forbidden":
        hint = difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc), n=1)
        return f"unknown key {dotted!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    if error["type"] == "missing":
        return f"missing required key {dotted!r}"
    if error["type"] == "config":
        message = error["ctx"]["message"]
    elif error["type"] in _SHAPE_ERRORS and (annotation := annotation_at(model, loc)) is not None:
        message = f"expected {describe(annotation)}; got {shown(error.get('input'))}"
    else:
        message = str(error["msg"]).removeprefix("Value error, ")
    return f"{dotted}: {message}" if dotted else message


def config_problems(error: ValidationError, model: type[BaseModel],
                    nested: Mapping[str, type[BaseModel]] | None = None) -> list[tuple[Location, str]]:
    """(location, readable message) for every schema problem of a config. `nested`: fields whose problems are read
    against another model, located as if its keys were written in their place (a study's section, which the
    config's model types only as its base, and whose keys the YAML has at the top level)."""
    problems = []
    for e in error.errors():
        loc = tuple(e["loc"])
        if loc and nested and loc[0] in nested:
            loc = loc[1:]
            problems.append((loc, _message(loc, e, nested[e["loc"][0]])))
        else:
            problems.append((loc, _message(loc, e, model)))
    return problems


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
