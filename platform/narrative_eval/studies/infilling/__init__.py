"""The narrative-infilling study: a blank in a passage filled under prompt settings, scored by the metrics against
the gold and by judges. One package: its words (`vocabulary`), config keys (`config`), items (`cell`), judge control
items (`controls`), report (`report`, `report_samples`), the app's live form (`live`) and its declaration (`study`:
the library's single-turn loop runs its cells and writes their MLflow records)."""

from narrative_eval.studies.infilling.cell import select_instances
from narrative_eval.studies.infilling.study import InfillingStudy
from narrative_eval.studies.infilling.vocabulary import NAME

__all__ = ["NAME", "InfillingStudy", "select_instances"]
