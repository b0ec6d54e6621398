"""Answer live: any single-turn study that declares its prompt file (here the example continuation plugin) answers an
item typed in the form with the embedded SmolLM2, read by the study's own answer step (no browser)."""

from __future__ import annotations

import pytest

from ui.common import AppSettings
from ui.live import Refused
from ui.live_study import declared_studies, setting_fields, study_answer


def test_a_plugin_study_answers_an_item_typed_in_its_template_fields():
    study = declared_studies()["continuation"]
    assert "infilling" not in declared_studies()  # it renders its own messages: the Fill live tab is its form
    assert setting_fields("continuation", "guided") == ["domain", "opening"]
    app = AppSettings()
    opening = "The ferry left the harbour at dawn. Gulls followed it past the lighthouse."
    with pytest.raises(Refused, match="Fill in domain"):
        list(study_answer(app, "continuation", "guided", "smollm2", {"opening": opening}, 0.0, 24))
    frames = list(study_answer(app, "continuation", "guided", "smollm2", {"domain": "story", "opening": opening},
                               0.0, 24))
    reply, line = frames[-1]
    assert reply.strip() and any(status == "generating…" for _, status in frames)
    answer = study.answer(None, None, reply).text
    assert answer and answer in reply and line == f"**{study.answer_column}:** {answer}"
