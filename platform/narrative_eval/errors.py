"""User errors and the one wrapper every command runs under.

A user error is a mistake in what the user gave (a file, a flag, a config value): it is reported as
one ``error: ...`` line per problem (every problem found, each with its file:line where there is one),
the command exits 2, and no traceback is shown unless ``--debug`` or ``NARRATIVE_EVAL_DEBUG=1`` asks
for it. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import codecs
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from narrative_eval.quiet import quiet_dependencies

DEBUG_ENV = "NARRATIVE_EVAL_DEBUG"
"""Set to 1 to see the traceback behind a user error."""

USER_ERROR_EXIT = 2
"""Exit status of a command stopped by a user error (argparse uses 2 for bad flags too)."""

MAX_SHOWN = 50
"""Most problems printed; the rest are counted."""


class UserError(Exception):
    """Something the user gave is wrong; carries every problem found, so one pass fixes them all."""

    exit_status = USER_ERROR_EXIT
    """What the command exits with."""

    def __init__(self, problems: str | Iterable[str]):
        self.problems: list[str] = [problems] if isinstance(problems, str) else [str(p) for p in problems]
        super().__init__("\n".join(self.problems))

    def lines(self) -> list[str]:
        """The ``error: ...`` lines a command prints."""
        shown = [f"error: {problem}" for problem in self.problems[:MAX_SHOWN]]
        if len(self.problems) > MAX_SHOWN:
            shown.append(f"error: ... and {len(self.problems) - MAX_SHOWN} more")
        return shown


class DataError(UserError, ValueError):
    """A malformed row or record, located by file and line (1-based; the CSV header is line 1)."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class DataErrors(UserError, ValueError):
    """Several bad rows at once, so a researcher fixes a file in one pass."""

    def __init__(self, errors: list[DataError]):
        self.errors = errors
        super().__init__([str(e) for e in errors])

    def __str__(self) -> str:
        shown = "\n".join(f"  {e}" for e in self.errors[:20])
        more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
        return f"{len(self.errors)} invalid row(s):\n{shown}{more}"


class ModelLoadError(UserError):
    """A model's weights did not load whole (a weight missing or newly initialised, a file cut short or gone, a model
    class other than its config names): no number may come from it, so the sweep stops here, before any is
    computed, with one `error:` line naming the model and its path."""


class ServiceUnavailable(UserError):
    """A service the command needs (a tracking server, a model server) stopped answering: said plainly, exit 1."""

    exit_status = 1


def file_error(path: str | Path, line: int | None, message: str) -> DataErrors:
    """One located problem as the error loaders raise."""
    return DataErrors([DataError(path, line, message)])


def collect(problems: list[str], error: UserError) -> None:
    """Add a user error's problems to a running list (for checks that go on after the first failure)."""
    problems.extend(error.problems)


# --------------------------------------------------------------------------- reading text files

# Byte-order marks, longest first (UTF-32 LE starts with the UTF-16 LE mark).
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _utf16_without_bom(data: bytes) -> str | None:
    """utf-16-le/be when the bytes look like mostly-ASCII UTF-16 text (every other byte zero), else None."""
    sample = data[:4096]
    if len(sample) < 4 or len(sample) % 2:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.9 * len(odd) and even.count(0) == 0:
        return "utf-16-le"
    if even.count(0) > 0.9 * len(even) and odd.count(0) == 0:
        return "utf-16-be"
    return None


def detect_encoding(data: bytes) -> str:
    """The encoding of a text file's bytes: its byte-order mark, UTF-16 by its zero bytes, else UTF-8."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    return _utf16_without_bom(data) or "utf-8"


def decode_text(data: bytes, path: str | Path) -> str:
    """Text of a file's bytes in its detected encoding; a UserError with file:line when it is not text."""
    encoding = detect_encoding(data)
    for bom, name in _BOMS:
        if name == encoding and data.startswith(bom):
            data = data[len(bom):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise file_error(path, line, f"not {encoding.upper()} text (byte 0x{data[error.start]:02x} cannot be decoded); "
                                     "expected a UTF-8 (or UTF-16 with a byte-order mark) text file") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise file_error(path, line, "a NUL character: this looks like a binary file; expected UTF-8 text")
    return text


def read_text(path: str | Path, what: str = "file") -> str:
    """A user's text file, decoded (UTF-8, or UTF-16/32 with a byte-order mark); UserError when missing or binary."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise file_error(path, None, f"{what} not found") from None
    except IsADirectoryError:
        raise file_error(path, None, f"is a folder; expected a {what}") from None
    except PermissionError:
        raise file_error(path, None, f"cannot read the {what} (permission denied)") from None
    return decode_text(data, path)


def require_file(path: str | Path | None, what: str, problems: list[str]) -> None:
    """Record a problem when a file the user named is missing or unreadable as text."""
    if path is None:
        return
    try:
        read_text(path, what)
    except UserError as error:
        collect(problems, error)


# --------------------------------------------------------------------------- commands


def debug_requested(argv: Sequence[str]) -> bool:
    return "--debug" in argv or os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def cli_main(main: Callable[[list[str]], int], argv: Sequence[str] | None = None) -> int:
    """Run a command's main(argv) with the dependencies' known harmless warnings silenced (`narrative_eval.quiet`):
    user errors become ``error:`` lines and exit 2; bugs keep their traceback.

    ``--debug`` is taken out of argv here (parsers list it only for --help), so every command
    understands it the same way.
    """
    # Before any model or metric library loads (torchao logs while it is imported): a warning the user then
    # sees is one nobody has judged harmless.
    quiet_dependencies()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    args = [a for a in args if a != "--debug"]
    try:
        return main(args)
    except UserError as error:
        if debug:
            traceback.print_exc()
        sys.stdout.flush()
        print("\n".join(error.lines()), file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def add_debug_flag(parser) -> None:
    """The --debug flag in a command's help (cli_main reads it)."""
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback behind an error (or set {DEBUG_ENV}=1)")
