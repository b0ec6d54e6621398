"""A multi-turn study declared from outside the project: a story written from a brief, then revised turn by turn
(`plain`: each note alone; `recap`: each note with the brief again), judged by its own checklist and quality rubrics.
The library writes its traces, control checks and report."""

import json
from pathlib import Path

from narrative_eval.evaluation import ANSWER, Item
from narrative_eval.judges import register_rubric
from narrative_eval.multi_turn import MultiTurnConfig, MultiTurnStudy
from narrative_eval.study import Choices, Grid, study

HERE = Path(__file__).parent
CHECKLIST, QUALITY = register_rubric(HERE / "revision_checklist.yaml"), register_rubric(HERE / "revision_quality.yaml")


class RevisionConfig(MultiTurnConfig):
    grid = Grid(conditions=Choices("condition", ("plain", "recap"), lambda config: ("plain", "recap"), "plain, recap"))


@study("revision")
class RevisionStudy(MultiTurnStudy):
    config_section, scorers, dimensions = RevisionConfig, ("checklist", "quality"), ("adherence", "vividness")
    judge_sees = {"brief": "brief", "requirements": "requirements", "story": ANSWER}

    def items(self, cell):
        rows = [json.loads(line) for line in Path(cell.data_path).read_text(encoding="utf-8").splitlines() if line]
        return [Item(r["id"], {"brief": r["brief"], "requirements": r["requirements"]}, {}, {"genre": r["genre"]},
                     record=r["notes"]) for r in rows][: cell.limit]

    def system_prompt(self, cell):
        return "You are a storyteller. Keep every story under 60 words."

    def turns(self, cell, item):
        recap = f" Keep to the brief: {item.fields['brief']}" if cell.condition == "recap" else ""
        return [item.fields["brief"], *(f"Revise the story: {note}{recap}" for note in item.record)]

    def scorer_rubric(self, judge, scorer):
        return CHECKLIST if scorer == "checklist" else judge.rubric or QUALITY

    def judged_record(self, cell, conversation, judge_id):
        verdicts = conversation.verdicts[judge_id]
        return {"adherence": verdicts["checklist"].scores["adherence"], **verdicts["quality"].scores}

    def record_scores(self, record):
        return record
