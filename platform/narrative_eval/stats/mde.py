"""Minimum detectable effect of a sweep, and the instance count a target difference needs.

Normal approximation for a two-sided paired test: a difference Δ is detected with probability `power` at
level α when Δ >= (z_{1-α/2} + z_{power}) · σ / sqrt(n), σ being the per-instance SD of the paired
differences. σ comes from the sweep's own paired comparisons (stats.paired): σ² = n · SE², with SE the
passage-clustered standard error of each comparison's Δ, pooled as the mean σ² over the defined
comparisons of a metric, so instances sharing a passage count for what they are worth.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from narrative_eval.lazy import lazy_module

pd = lazy_module("pandas")

POWER = 0.80
"""Power the minimum detectable effect is computed for."""

ALPHA = 0.05
"""Two-sided test level."""


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1-α/2} + z_{power} (2.80 for α = 0.05 and 80% power)."""
    return NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)


def mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest paired mean difference detectable with n instances whose differences have SD `sd`."""
    return z_sum(alpha, power) * sd / math.sqrt(n) if n > 0 and np.isfinite(sd) else float("nan")


def needed_instances(sd: float, delta: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Instances needed to detect a paired difference `delta` (rounded up); NaN when undefined."""
    if not (np.isfinite(sd) and delta and np.isfinite(delta)):
        return float("nan")
    return float(math.ceil((z_sum(alpha, power) * sd / abs(delta)) ** 2))


def mde_table(comparisons: pd.DataFrame, n_instances: int, target: float | None = None) -> pd.DataFrame:
    """One row per compared metric: metric, n_instances, mde, sd (pooled per-instance SD of differences),
    n_comparisons (defined comparisons pooled), target_delta and n_needed (with `target`), reason (when undefined)."""
    rows = []
    for metric, group in comparisons.groupby("metric", sort=True) if not comparisons.empty else []:
        defined = group[np.isfinite(group["se"].astype(float))]
        variances = (defined["se"].astype(float) ** 2) * defined["n"].astype(float)
        sd = float(np.sqrt(variances.mean())) if len(variances) else float("nan")
        row = {"metric": metric, "n_instances": n_instances, "mde": mde(sd, n_instances), "sd": sd,
               "n_comparisons": len(defined)}
        if target is not None:
            row.update(target_delta=target, n_needed=needed_instances(sd, target))
        row["reason"] = "" if len(defined) else f"no defined paired comparison among {len(group)}"
        rows.append(row)
    return pd.DataFrame(rows)


def mde_summary(mde_csv) -> str | None:
    """One line for the end of a sweep from its report's mde.csv (None when the report has none)."""
    from pathlib import Path

    path = Path(mde_csv)
    if not path.exists() or path.stat().st_size <= 1:
        return None
    table = pd.read_csv(path, keep_default_na=True)
    if table.empty:
        return None
    parts = []
    for row in table.itertuples():
        text = f"{row.mde:.4f}" if np.isfinite(row.mde) else f"undefined ({row.reason})"
        if "n_needed" in table and np.isfinite(row.n_needed):
            text += f", {int(row.n_needed)} instances for Δ {row.target_delta:g}"
        parts.append(f"{row.metric} {text}")
    n = int(table["n_instances"].iloc[0])
    return f"minimum detectable effect ({POWER:.0%} power, alpha {ALPHA}, {n} instances): " + "; ".join(parts)


def plan_from(mde_csv, n_instances: int, target: float | None = None) -> list[str]:
    """Before a sweep runs: its minimum detectable effects with `n_instances`, from the per-instance SDs an
    earlier sweep's report measured (its mde.csv), and the instances a `target` difference needs."""
    from pathlib import Path

    table = pd.read_csv(Path(mde_csv))
    lines = []
    for row in table.itertuples():
        if not np.isfinite(row.sd):
            lines.append(f"{row.metric}: undefined in {mde_csv} ({row.reason})")
            continue
        text = f"{row.metric}: MDE {mde(row.sd, n_instances):.4f} with {n_instances} instances (SD {row.sd:.4f})"
        if target is not None:
            text += f"; Δ {target:g} needs {needed_instances(row.sd, target):.0f} instances"
        lines.append(text)
    return lines
