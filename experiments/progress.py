"""Terminal progress bars (tqdm) for the sweep's stages."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm


def tqdm_progress(items: Iterable[Any], description: str = "", total: int | None = None) -> Iterable[Any]:
    """Progress bar per stage with counts and ETA; nested bars stack below the cells bar."""
    position = 0 if description == "cells" else 1
    return tqdm(items, desc=description, total=total, position=position, leave=description == "cells", dynamic_ncols=True)
