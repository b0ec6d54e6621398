"""LLM judges: rubrics as data, blinded prompts, structured and validated answers, retries,
recorded failures, and agreement statistics across judge panels."""

from narrative_eval.judges.judge import (
    HIGH_QUALITY_THRESHOLD,
    failure_rate,
    is_high_quality,
    judge_many,
    judge_pairwise,
    judge_pairwise_orders,
    judge_params,
    pairwise_consistency,
    qavg,
    summarize,
)
from narrative_eval.judges.render import (
    normalize_requirements,
    render_item,
)
from narrative_eval.judges.rubric import (
    RUBRICS,
    Rubric,
    RubricError,
    answer_schema,
    available_rubrics,
    load_rubric,
    register_rubric,
    rubric_hash,
)
from narrative_eval.judges.validate import JudgeReplyError, parse_reply

__all__ = [
    "HIGH_QUALITY_THRESHOLD",
    "JudgeReplyError",
    "RUBRICS",
    "Rubric",
    "RubricError",
    "answer_schema",
    "available_rubrics",
    "failure_rate",
    "is_high_quality",
    "judge_many",
    "judge_pairwise",
    "judge_pairwise_orders",
    "judge_params",
    "load_rubric",
    "normalize_requirements",
    "pairwise_consistency",
    "parse_reply",
    "qavg",
    "render_item",
    "register_rubric",
    "rubric_hash",
    "summarize",
]
