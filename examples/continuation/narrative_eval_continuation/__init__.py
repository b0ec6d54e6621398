"""Story continuation, a study from outside the platform (see ../README.md); importing it registers the study."""

from narrative_eval_continuation.study import ContinuationStudy

__all__ = ["ContinuationStudy"]
