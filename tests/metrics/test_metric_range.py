"""A metric declares its range and its values are never clipped: a value in range is logged as computed (a negative
correlation stays negative), a value outside stops the cell with an error naming the metric and the value, and only
a cosine's floating rounding past a bound is taken as the bound. A blank scores 0.0 on a metric whose range starts
at 0 and NaN (no score) on one whose range holds 0 as an ordinary value."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from narrative_eval import tracking
from narrative_eval.config import load_config
from narrative_eval.metrics import METRICS, Metric, MetricRangeError, metric
from narrative_eval.sweep import run_sweep

BACKENDS = Path(__file__).parents[1] / "backends"
TAU = -1 / 3
"""What the signed test metric computes for every pair: a negative value inside its declared range (-1, 1)."""


@pytest.fixture
def registered():
    """Register test metrics for one test (their registry entries are removed after it); name -> class."""
    names: list[str] = []

    def register(name: str, value: float, **options) -> type[Metric]:
        class Constant(Metric):
            def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
                return [value] * len(candidates)

        names.append(name)
        return metric(name, **options)(Constant)

    yield register
    for name in names:
        METRICS.remove(name)


def test_a_value_in_a_signed_range_is_kept_and_a_blank_is_no_score(registered):
    tau = registered("test_tau", TAU, range=(-1, 1))()
    scores = tau.score(["a b", "", "c"], ["a b c", "x", "c"])
    assert scores[0] == scores[2] == TAU and math.isnan(scores[1])


def test_a_value_outside_the_range_is_an_error_naming_metric_and_value(registered):
    with pytest.raises(MetricRangeError, match=r"metric 'test_over' computed 1\.5, outside its declared range \[0, 1\]"):
        registered("test_over", 1.5)().score(["a"], ["b"])
    with pytest.raises(MetricRangeError, match=r"computed -0\.01"):
        registered("test_under", -0.01)().score(["a"], ["b"])  # a real negative on a (0, 1) metric is not hidden
    with pytest.raises(MetricRangeError, match="nan"):
        registered("test_nan", math.nan)().score(["a"], ["b"])


def test_only_floating_rounding_past_a_bound_is_the_bound(registered):
    assert registered("test_rounded", 1 + 2.4e-7)().score(["a", ""], ["b", "b"]) == [1.0, 0.0]
    assert registered("test_rounded_low", -5e-7, range=(-1, 1))().score(["a"], ["b"]) == [0.0 - 5e-7]


def test_a_range_must_be_low_then_high():
    with pytest.raises(ValueError, match="low < high"):
        metric("test_backwards", range=(1, -1))


@pytest.mark.server
def test_a_cell_logs_a_negative_value_as_computed_and_stops_on_one_out_of_range(registered, tmp_path, repo_root):
    sys.path.insert(0, str(BACKENDS))
    from api_server import start_instant_server

    from tests.servers import stop

    registered("test_tau", TAU, range=(-1, 1))
    registered("test_over", 1.5)
    server, base_url = start_instant_server()
    try:
        outcomes = {}
        for name in ("test_tau", "test_over"):
            config = tmp_path / f"{name}.yaml"
            config.write_text(f"""
study: infilling
sweep: range-{name}
data: {repo_root / 'data/infilling/sample.jsonl'}
limit: 2
models: [{{id: instant, backend: openai_compatible, weights: instant, options: {{base_url: '{base_url}'}}}}]
prompt_settings: [L2]
generation: {{temperature: 0.0, max_new_tokens: 16}}
metrics: {{names: [{name}]}}
judge_checks: false
report_dir: {tmp_path / name}
""")
            [outcomes[name]] = run_sweep(load_config(str(config))).cells
    finally:
        stop(server)
    assert outcomes["test_tau"].status == "finished"
    [run] = tracking.sweep_cell_runs("infilling", "range-test_tau").to_dict("records")
    assert run["metrics.test_tau"] == pytest.approx(TAU)
    rows = tracking.load_table(run["run_id"], "generations.json").to_dict("records")
    assert [row["test_tau"] for row in rows if row["answer"]] == [pytest.approx(TAU)] * 2
    assert outcomes["test_over"].status == "failed"
    [failed] = tracking.sweep_cell_runs("infilling", "range-test_over", finished_only=False).to_dict("records")
    assert "metric 'test_over' computed 1.5, outside its declared range [0, 1]" in failed["tags.narrative_eval.error"]
