"""The infilling study's live form: a passage with one blank (pasted, or an instance of a data file), the gold fill
(optional) and how many sentences are missing; the fill is extracted as a cell extracts it, and the form says how
it was found and warns when it repeats the passage."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from narrative_eval.data.instances import BLANK_RE
from narrative_eval.evaluation import Answer, Item
from narrative_eval.records import InfillingInstance
from narrative_eval.studies.infilling.extraction import repeats_passage
from narrative_eval.studies.live import LIVE, LiveField, LiveForm
from narrative_eval.studies.infilling.vocabulary import REPEATS_PASSAGE, STATUS_WORDS

EXAMPLE_PASSAGE = ("The lighthouse keeper climbed the stairs every evening at dusk. ______ "
                   "By midnight the beam had guided three fishing boats safely into the harbour.")
"""The passage the form opens with."""
TAGS = re.compile(r"<\s*/?\s*answer\s*>", re.IGNORECASE)
"""The answer tags the prompts ask for, left out of a reply as it streams into the blank."""
FIELDS = (LiveField("passage", "Passage with one blank (______)", lines=7, value=EXAMPLE_PASSAGE),
          LiveField("gold", "Gold text (optional)", noun="gold text", lines=2, optional=True),
          LiveField("n", "Missing sentences (n)", noun="missing sentences", optional=True, bounds=(1, 3), value=1))


class InfillingLiveForm(LiveForm):
    action, verb = "Fill the blank", "fill"
    help = ("Paste a passage with one blank (`______`, six underscores) or pick one from the shipped data, then let a "
            "model fill it. The reply streams into the passage; with a gold text the automatic metrics are computed "
            "when it ends.")
    text_field, reference_field = "passage", "gold"

    def fields(self, setting: str | None) -> list[LiveField]:
        return list(FIELDS)

    def problem(self, values: Mapping[str, Any], setting: str | None) -> tuple[str, str] | None:
        passage = self.text(values)
        if not passage:
            return "passage", "The passage is empty: paste one with a blank (`______`), or pick one from the data."
        blanks = len(BLANK_RE.findall(passage))
        if blanks != 1:
            found = "no blank" if not blanks else f"{blanks} blanks"
            return "passage", (f"The passage has {found}; it needs exactly one: six underscores `______` where the "
                               "missing text goes.")
        return None

    def item(self, values: Mapping[str, Any], setting: str | None) -> Item:
        passage, gold = self.text(values), str(values.get("gold") or "").strip()
        instance = InfillingInstance(dataset="custom", ref_id=LIVE, source_text=passage, problem=passage,
                                     gold_answer=gold, n=int(values.get("n") or 1), unit_idx=0)
        return Item(LIVE, {"problem": passage}, {"gold": gold} if gold else {}, record=instance)

    def values(self, item: Item) -> dict[str, Any]:
        return {"passage": item.record.problem, "gold": item.record.gold_answer, "n": item.record.n}

    def label(self, item: Item) -> str:
        instance = item.record
        return f"{instance.dataset}/{instance.ref_id} · n={instance.n} · idx {instance.unit_idx}"

    def streamed(self, reply: str) -> str:
        return TAGS.sub("", reply).strip()

    def notes(self, item: Item, answer: Answer) -> list[str]:
        """How the fill was taken from the reply, and a warning when it repeats the passage itself."""
        line = f"extraction: {answer.status} — {STATUS_WORDS.get(answer.status or '', answer.status)}"
        return [line, *([REPEATS_PASSAGE] if repeats_passage(answer.text, item.record.problem) else [])]
