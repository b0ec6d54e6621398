"""Errors for bad input files: every message names the file and the line (defined with the other user errors)."""

from narrative_eval.errors import DataError, DataErrors

__all__ = ["DataError", "DataErrors"]
