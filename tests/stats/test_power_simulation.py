"""Simulated sweeps: a known AtAvg shift injected into one cell is found at about the power the MDE formula predicts."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from narrative_eval.metrics import at_avg_names
from narrative_eval.stats.mde import mde, mde_table
from narrative_eval.stats.paired import ALPHA, paired_settings

N_INSTANCES = 50
N_SWEEPS = 250
NOISE = 0.04
"""SD of each cell's per-instance noise; a paired difference has SD sqrt(2) * NOISE."""


def _sweep(rng: np.random.Generator, shift: float) -> pd.DataFrame:
    """One model at L0 and L2 on the same instances (one passage each); L2's AtAvg is `shift` higher."""
    base = rng.uniform(0.2, 0.4, N_INSTANCES)
    frames = []
    for setting, offset in (("L0", 0.0), ("L2", shift)):
        values = base + offset + rng.normal(0.0, NOISE, N_INSTANCES)
        frame = pd.DataFrame({"model": "m", "setting": setting, "seed": 0,
                              "instance_id": [f"d/p{i}/0/1" for i in range(N_INSTANCES)]})
        frames.append(frame.assign(**{name: values for name in at_avg_names()}))
    return pd.concat(frames, ignore_index=True)


def _rejections(shift: float, seed: int) -> tuple[float, list[pd.DataFrame]]:
    rng = np.random.default_rng(seed)
    tables = [paired_settings(_sweep(rng, shift), n_boot=400) for _ in range(N_SWEEPS)]
    found = [bool(t.loc[t["metric"] == "at_avg", "p"].iloc[0] < ALPHA) for t in tables]
    return float(np.mean(found)), tables


def test_injected_shift_is_found_at_the_predicted_power_and_no_shift_at_alpha():
    started = time.process_time()  # CPU time: other work on a shared machine does not count
    shift = mde(np.sqrt(2) * NOISE, N_INSTANCES)  # the true MDE: power 0.80 by the formula
    power, tables = _rejections(shift, seed=1)
    # 250 sweeps: binomial SD of a 0.80 rate is 0.025; the bootstrap with an estimated SD runs a little below z.
    assert 0.70 <= power <= 0.88, power
    # Each sweep's own MDE estimate (from its paired variance) scatters around the true one.
    estimates = [mde_table(t, N_INSTANCES).set_index("metric").loc["at_avg", "mde"] for t in tables]
    assert abs(np.median(estimates) / shift - 1) < 0.1
    false_alarms, _ = _rejections(0.0, seed=2)
    assert false_alarms <= 0.09, false_alarms
    assert time.process_time() - started < 30  # about 15 s
