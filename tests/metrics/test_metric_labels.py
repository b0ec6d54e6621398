"""How the app names the registered metrics and AtAvg: the label each metric registers with."""

from narrative_eval.metrics import AT_AVG, AT_AVG_LABEL, METRICS, metric_label


def test_every_registered_metric_and_at_avg_has_a_readable_label():
    assert [metric_label(name) for name in METRICS.names()] == ["BERTScore", "ROUGE-1", "METEOR", "chrF", "Sem-F1"]
    assert metric_label(AT_AVG) == AT_AVG_LABEL == "AtAvg"
    assert metric_label("a_plugin_number") == "a_plugin_number"  # unknown names stay as logged
