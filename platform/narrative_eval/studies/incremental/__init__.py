"""The incremental-delivery study: one creative-writing brief delivered FULL, SHARDED or with replanning turns,
judged by a requirement checklist and quality dimensions, compared in pairs and validated by people. One package:
its words (`vocabulary`), records (`records`), tasks (`tasks`, `cell_tasks`), conditions (`turns`, `conditions`),
score records and their numbers (`judged`, `score_records`), config keys (`config`),
statistics (`effects`, `human_records`, `human_stats`), pairwise judges (`pairwise`,
`pairwise_files`), reports (`report*`), story ratings for the app (`stories`) and its registration (`study`)."""

from narrative_eval.studies.incremental import conditions  # registers the delivery conditions
from narrative_eval.studies.incremental.study import IncrementalDeliveryStudy
from narrative_eval.studies.incremental.vocabulary import NAME

__all__ = ["NAME", "conditions", "IncrementalDeliveryStudy"]
