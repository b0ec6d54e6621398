"""The infilling study's own config keys."""

from __future__ import annotations

from typing import Any

from narrative_eval.data.infilling import file_sha256
from narrative_eval.study import StudyConfig


class InfillingConfig(StudyConfig):
    """Keys of an infilling sweep config beside the generic ones."""

    prompt_file: str | None = None
    """Alternative prompt settings file (defaults to the packaged one)."""

    def cell_extra(self) -> dict[str, Any]:
        if not self.prompt_file:
            return {}
        return {"prompt_file": self.prompt_file, "prompt_file_sha256": file_sha256(self.prompt_file)}

    def required_files(self) -> dict[str, str | None]:
        return {"prompt file": self.prompt_file}
