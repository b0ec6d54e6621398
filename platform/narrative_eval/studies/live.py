"""The app's live form of a single-turn study, read from its declaration: its prompt settings, the fields it asks
for under one of them, how typed values become an item (and an item of a data file becomes values), what it
refuses, and how it tells the answer it scores. A study whose form is not its template's slots (the infilling
passage with its blank) gives its own through `Study.live_form`."""

from __future__ import annotations

import html
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from narrative_eval.config import grid_of
from narrative_eval.evaluation import ANSWER, Answer, Item, SingleTurnStudy
from narrative_eval.prompts.render import PROMPT_SETTINGS, SLOT, load_prompt_file
from narrative_eval.records import CellSpec, ModelSpec, Message
from narrative_eval.reports.labels import label
from narrative_eval.study import STANDARD

LIVE = "live"
"""The id of an item typed in the form, and the sweep name of its cell."""
NO_MODEL = ModelSpec(id=LIVE, weights="")
"""The model of a cell that only reads items (a study's items never depend on the model)."""


@dataclass(frozen=True)
class LiveField:
    """One input of a study's live form."""

    name: str
    """Its key in the typed values (and in the page: `live-<name>`)."""
    label: str
    """Its label on the page."""
    noun: str = ""
    """What messages call it ('passage'); default: its name in words."""
    lines: int = 3
    """Text lines of its box."""
    optional: bool = False
    """Whether it may stay empty."""
    bounds: tuple[int, int] | None = None
    """(lowest, highest) of a whole-number field; None: a text."""
    value: Any = ""
    """What it holds when the form opens."""

    @property
    def called(self) -> str:
        return self.noun or label(self.name).lower()


def shown_field(study: SingleTurnStudy) -> str:
    """The item field a judge reads beside the answer: the text every answer goes into or after."""
    return next(field for field in study.judge_sees.values() if field != ANSWER)


def prompt_setting_choices(study: SingleTurnStudy) -> tuple[list[tuple[str, str]], list[str]]:
    """(its prompt settings as (name — title, name), the default ones): those of the prompt file it declares, else
    those its config section's grid names for a config that leaves its own keys at their defaults."""
    if study.prompts is not None:
        settings = load_prompt_file(study.prompts).settings
        names = list(settings)
    else:
        choices = grid_of(study.name).prompt_settings
        names = list(choices.names(SimpleNamespace(section=study.config_section())) or []) if choices.names else []
        settings = {name: _registered_setting(name) for name in names}
    titled = [(f"{name} — {settings[name].get('title', '')}", name) for name in names]
    default = [name for name in grid_of(study.name).prompt_settings.default if name in names] or names[:1]
    return titled, default


def _registered_setting(name: str) -> dict[str, Any]:
    """A registered prompt setting's entry in its prompt file ({} for a system prompt text)."""
    target = PROMPT_SETTINGS.get(name)
    return {} if isinstance(target, str) else target.settings[name]


class LiveForm:
    """A single-turn study's live form as its declaration gives it: one box per slot of the setting's user template
    (the item's fields), then one for its reference (optional: the metrics need it); the reply's answer is the
    study's answer step's. A study overrides what is not so for it."""

    action = "Answer"
    """The button that sends the item."""
    verb = "answer"
    """What the button does to the item, in a sentence ('press Answer again to answer it anyway')."""

    def __init__(self, study: SingleTurnStudy):
        self.study = study

    @property
    def help(self) -> str:
        """What the form asks for, above it (markdown)."""
        return (f"Type the fields of one **{self.study.name}** item its prompt setting asks for, and the model's reply "
                f"streams in, then the {label(self.study.answer_column).lower()} the study scores in it; with the "
                "reference typed too, the automatic metrics are computed when it ends.")

    def fields(self, setting: str | None) -> list[LiveField]:
        """The boxes shown under `setting`, in order."""
        prompts = self.study.prompt_file(None) if self.study.prompts is not None else None
        template = prompts.settings[setting]["user"] if prompts is not None and setting in prompts.settings else ""
        slots = dict.fromkeys(match.group(1) for match in SLOT.finditer(template))
        reference = self.study.reference
        # Each box under its label (the study's words, through the one label map), never its field's raw name.
        return [*(LiveField(slot, label(slot)) for slot in slots if slot != reference),
                LiveField(reference, f"{label(reference)} (optional)", optional=True)]

    def all_fields(self) -> list[LiveField]:
        """Every box any of its settings shows, in order of first use, the reference last (the page lays them all
        out once)."""
        found: dict[str, LiveField] = {}
        for _, setting in prompt_setting_choices(self.study)[0]:
            for field in self.fields(setting):
                found.setdefault(field.name, field)
        return sorted(found.values(), key=lambda field: field.name == self.reference_field)

    @property
    def text_field(self) -> str:
        """The field whose text the answer goes into or after (shown with it; long ones are asked about first)."""
        return shown_field(self.study)

    @property
    def reference_field(self) -> str:
        """The field that holds the reference the metrics score against."""
        return self.study.reference

    def text(self, values: Mapping[str, Any]) -> str:
        return str(values.get(self.text_field) or "").strip()

    def problem(self, values: Mapping[str, Any], setting: str | None) -> tuple[str, str] | None:
        """(field, what is wrong) when the typed values cannot make an item, else None."""
        empty = [field for field in self.fields(setting)
                 if not field.optional and not str(values.get(field.name) or "").strip()]
        if empty:
            return empty[0].name, f"Fill in the {' and the '.join(field.called for field in empty)}."
        return None

    def item(self, values: Mapping[str, Any], setting: str | None) -> Item:
        """The item the typed values make (its reference only when typed)."""
        typed = {field.name: str(values.get(field.name) or "").strip() for field in self.fields(setting)}
        reference = typed.pop(self.reference_field, "")
        return Item(LIVE, typed, {self.reference_field: reference} if reference else {})

    def values(self, item: Item) -> dict[str, Any]:
        """What the form's boxes hold for an item picked from a data file."""
        names = {field.name for field in self.all_fields()}
        return {name: value for name, value in {**item.fields, **item.references}.items() if name in names}

    def label(self, item: Item) -> str:
        """How an item of a data file is listed."""
        return item.id

    def streamed(self, reply: str) -> str:
        """What the page shows of a reply while it streams in."""
        return reply.strip()

    def notes(self, item: Item, answer: Answer) -> list[str]:
        """What the form says of the answer (markdown): a line, then warnings under it."""
        shown = html.escape(answer.text) if answer.text else "(none)"
        return [f"**{html.escape(label(self.study.answer_column))}:** {shown}"]

    def cell(self, setting: str | None, model: ModelSpec | None = None, data_path: str | Path = "") -> CellSpec:
        """The cell a live item is sent and answered under: the setting, the model, the config section's defaults."""
        return CellSpec(study=self.study.name, sweep=LIVE, model=model or NO_MODEL,
                        prompt_setting=setting or STANDARD, data_path=str(data_path), data_sha256="",
                        extra=self.study.config_section().cell_extra())

    def messages(self, cell: CellSpec, item: Item) -> list[Message]:
        return self.study.messages(cell, item)

    def items_in(self, path: str | Path) -> list[Item]:
        """The study's items of a data file, as a cell reads them (read once per version of the file); none when it
        cannot read them."""
        path = Path(path)
        key = (self.study.name, str(path.resolve()), path.stat().st_mtime if path.is_file() else None)
        with _items_lock:
            if key not in _items:
                try:
                    _items[key] = self.study.items(self.cell(None, data_path=path)) if key[2] is not None else []
                except Exception:  # a file of another kind, or malformed: nothing to pick from it
                    _items[key] = []
            return _items[key]


_items_lock = threading.Lock()
_items: dict[tuple[str, str, float | None], list[Item]] = {}


def item_files(study: SingleTurnStudy, folder: Path) -> list[Path]:
    """The files under `folder` that hold items of the study (those its `items` reads for a cell), in path order: the
    data the app offers for it."""
    form = live_form(study)
    return [path for path in sorted(folder.rglob("*")) if path.is_file() and form.items_in(path)]


def live_form(study: SingleTurnStudy) -> LiveForm:
    """The study's own live form, else the one its declaration gives."""
    return study.live_form() or LiveForm(study)


__all__ = ["LIVE", "LiveField", "LiveForm", "item_files", "live_form", "prompt_setting_choices", "shown_field"]
