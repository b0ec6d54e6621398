"""Planning a sweep's size before it runs, from the variance an earlier sweep measured (its report's mde.csv)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from narrative_eval.stats.mde import plan_from, z_sum


def earlier_mde_csv(folder):
    path = folder / "mde.csv"
    path.write_text("metric,n_instances,mde,sd,n_comparisons,reason\n"
                    "at_avg,12,0.08,0.1,4,\n"
                    "judge:qavg,12,,,0,no defined paired comparison among 4\n")
    return path


def test_the_plan_by_hand(tmp_path):
    lines = plan_from(earlier_mde_csv(tmp_path), 100, target=0.01)
    # MDE = (z_0.975 + z_0.8) * sd / sqrt(n) = 2.8016 * 0.1 / 10; n for Δ 0.01 = ceil((2.8016 * 0.1 / 0.01)^2) = 785
    assert z_sum() == pytest.approx(2.8016, abs=1e-4)
    assert lines[0] == "at_avg: MDE 0.0280 with 100 instances (SD 0.1000); Δ 0.01 needs 785 instances"
    assert lines[1].startswith("judge:qavg: undefined") and "no defined paired comparison" in lines[1]


def test_a_dry_run_prints_the_plan_without_generating(tmp_path, repo_root):
    command = [sys.executable, "-m", "experiments.sweep", "--config", "experiments/configs/quickstart.yaml",
               "--dry-run", "--data", "data/infilling/benchmark.csv", "--limit", "50", "--variance-from", str(earlier_mde_csv(tmp_path)), "--mde-target", "0.02"]
    done = subprocess.run(command, cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "at_avg: MDE 0.0396 with 50 instances" in done.stdout and "Δ 0.02 needs 197 instances" in done.stdout
    missing = subprocess.run(command[:-4] + ["--variance-from", str(tmp_path / "none.csv")], cwd=repo_root,
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and "error:" in missing.stderr and "Traceback" not in missing.stderr
