"""Score records simulated with a known FULL - SHARDED shift: the bootstrap interval recovers it."""

from __future__ import annotations

import numpy as np
from narrative_eval.studies.incremental.effects import icir_table, pair_frame, paired_effects, responses_frame
from narrative_eval.studies.incremental.records import ScoreRecord

N_TASKS = 80
MODELS = ("m1", "m2", "m3", "m4")
N_ITEMS = 4
P_ITEM_MET = 0.7  # FULL: an item scores 1 with this probability, else 0.5
P_DROP = 0.4  # SHARDED: the first item is lost (scored 0) with this probability
P_STRUCTURE_DROP = 0.5  # SHARDED: structure drops one point with this probability

# Known population shifts, from the simulation's own definition:
ADHERENCE_SHIFT = P_DROP * (P_ITEM_MET * 1 + (1 - P_ITEM_MET) * 0.5) / N_ITEMS  # 0.085
STRUCTURE_SHIFT = P_STRUCTURE_DROP * 1.0  # 0.5; FULL structure is never 1, so a drop is always possible


def simulate(seed: int) -> list[ScoreRecord]:
    rng = np.random.default_rng(seed)
    records = []
    for t in range(N_TASKS):
        story = f"g{t % 6}_{t:03d}"
        # A task-level difficulty shared by every model makes pairs of one task correlated.
        task_level = rng.integers(2, 5)
        for model in MODELS:
            structure_full = int(np.clip(task_level + rng.integers(-1, 2), 2, 5))
            items_full = np.where(rng.random(N_ITEMS) < P_ITEM_MET, 1.0, 0.5)
            items_sharded = items_full.copy()
            if rng.random() < P_DROP:
                items_sharded[0] = 0.0
            structure_sharded = structure_full - int(rng.random() < P_STRUCTURE_DROP)
            for condition, items, structure in (("full", items_full, structure_full), ("sharded", items_sharded, structure_sharded)):
                records.append(
                    ScoreRecord(
                        record_id=f"{model}/{condition}/{story}",
                        story_id=story,
                        genre=f"g{t % 6}",
                        model=model,
                        condition=condition,
                        judge="sim",
                        adherence=[{"constraint_id": f"c{k}", "score": float(s)} for k, s in enumerate(items)],
                        quality={"craft": 3, "structure_coherence": structure, "originality": 3, "genre_effectiveness": 3, "characterization": 3},
                    )
                )
    return records


def test_known_shift_lies_inside_the_bootstrap_interval():
    pairs = pair_frame(responses_frame(simulate(seed=2024)))
    assert len(pairs) == N_TASKS * len(MODELS)
    effects = paired_effects(pairs, n_boot=10_000, seed=0).set_index("dimension")
    for dimension, shift in (("adherence", ADHERENCE_SHIFT), ("structure_coherence", STRUCTURE_SHIFT)):
        row = effects.loc[dimension]
        assert row["lo"] <= shift <= row["hi"], (dimension, shift, row.to_dict())
        assert row["lo"] > 0, "the shift is detected, not only covered"
    # Dimensions that were not shifted stay at zero.
    assert effects.loc["craft", "delta"] == 0.0


def test_no_shift_means_icir_near_100():
    records = [r for r in simulate(seed=5) if r.condition == "full"]
    twins = [r.model_copy(update={"condition": "sharded", "record_id": r.record_id + "/twin"}) for r in records]
    table = icir_table(pair_frame(responses_frame(records + twins)), n_boot=2_000, seed=0)
    assert np.allclose(table["icir"], 100.0)
    assert np.allclose(table["icir_lo"], 100.0) and np.allclose(table["icir_hi"], 100.0)
