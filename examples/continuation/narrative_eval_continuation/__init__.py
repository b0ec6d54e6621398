"""Story continuation, a study from outside the platform (see ../README.md); importing it registers the study."""

from narrative_eval_continuation.study import ContinuationStudy  # noqa: F401 (importing it registers the study)
