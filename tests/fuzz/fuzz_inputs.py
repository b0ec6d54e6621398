"""Shared Hypothesis settings and input strategies for the fuzz tests."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from narrative_eval.errors import UserError

# Example counts sized for CI (2 cores): the whole fuzz folder runs in well under a minute.
# NARRATIVE_EVAL_FUZZ_SCALE=50 multiplies them for a longer search on a developer machine.
SCALE = float(os.environ.get("NARRATIVE_EVAL_FUZZ_SCALE", "1"))
FEW = settings(max_examples=int(40 * SCALE), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=int(150 * SCALE), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# Text a user's file or a model's reply may hold: any code point, with the characters parsers care about weighted up.
SPECIALS = list("\n\r\t,\"'{}[]:_<>/\\ \x00\ufeff") + ["______", "<answer>", "</answer>", "</think>", "```json", "\r\n"]
texts = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(SPECIALS)), max_size=40).map("".join)


@st.composite
def mutations(draw: st.DrawFn, original: bytes) -> bytes:
    """A valid file's bytes after a few random edits: deletions, insertions, overwrites, truncation, line shuffles."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "overwrite", "truncate", "swap_lines", "duplicate_line"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.one_of(st.binary(min_size=1, max_size=16), st.sampled_from(SPECIALS).map(str.encode)))
        elif kind == "overwrite" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[at:]
        else:
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "swap_lines":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines.insert(j, lines[i])
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def load_bytes(files: dict[str, bytes], loader: Callable[[dict[str, Path]], Any]) -> Any:
    """Write the files into a fresh folder and load them: a value, or a UserError whose every problem names a file.

    Anything else escaping the loader (UnicodeDecodeError, KeyError, RecursionError, csv.Error ...) fails the test.
    """
    with tempfile.TemporaryDirectory() as folder:
        paths = {name: Path(folder) / name for name in files}
        for name, data in files.items():
            paths[name].write_bytes(data)
        try:
            return loader(paths)
        except UserError as error:
            assert error.problems
            assert all(any(str(p) in problem for p in paths.values()) for problem in error.problems), error.problems
            return error
