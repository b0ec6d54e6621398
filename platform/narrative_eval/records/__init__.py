"""The typed records the pipeline passes around.

Every stage speaks in these records: data loaders produce instances and tasks, prompts
produce messages, backends turn messages into replies, extraction/metrics/judges turn
replies into scores, and tracking logs them. Specs are frozen and hashable to a stable
digest, so a cell can be reproduced from its logged spec and skipped when done.

The records live in three modules (base, specs, instances); import them from here. A study's own records live in
its package (`studies/incremental/records.py`, `studies/infilling/records.py`). The keys metrics and table columns
are logged under (`judge/<id>/<name>`, `seed<k>/<name>`, `_sd`, `_lo`, `_hi`) are made and parsed in
`records.keys`.
"""

from narrative_eval.records.base import (
    Frozen,
    GenerationParams,
    JudgeResult,
    Message,
    Reply,
    Role,
    TokenLogprob,
    Turn,
    derived_seed,
    finite_number,
    stable_hash,
)
from narrative_eval.records.instances import InfillingInstance, Position
from narrative_eval.records.specs import (FIRST_VERSION, CellSpec, JudgeSpec, JurySpec, MetricsSpec, ModelSpec,
                                         SubsetSpec)

__all__ = [
    "FIRST_VERSION",
    "CellSpec",
    "Frozen",
    "GenerationParams",
    "InfillingInstance",
    "JudgeResult",
    "JudgeSpec",
    "JurySpec",
    "Message",
    "MetricsSpec",
    "ModelSpec",
    "Position",
    "Reply",
    "Role",
    "TokenLogprob",
    "Turn",
    "SubsetSpec",
    "derived_seed",
    "finite_number",
    "stable_hash",
]
