"""The narrative-infilling study: a blank in a passage filled under prompt settings, scored by the metrics against
the gold and by judges. One package: its words (`vocabulary`), config keys (`config`), cell (`cell`), MLflow
records (`tracing`), report (`report`, `report_samples`) and its registration (`study`)."""

from narrative_eval.studies.infilling.cell import make_sample, select_instances, stream_fill
from narrative_eval.studies.infilling.study import InfillingStudy
from narrative_eval.studies.infilling.vocabulary import NAME

__all__ = ["NAME", "InfillingStudy", "make_sample", "select_instances", "stream_fill"]
