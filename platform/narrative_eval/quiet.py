"""The dependencies' warnings, log lines and bars known to be harmless, silenced by exact source so a new one stands out.

Every command (sweep, report, the app, a Ray cell worker) calls `quiet_dependencies()` first; the test
suite hands the same `KNOWN_WARNINGS` to pytest (tests/conftest.py). Each entry names the category, the
start of the message and the module the warning is attributed to: anything else still shows. A `-W` flag
or PYTHONWARNINGS is an explicit request and turns the warning filters off (the log filters stay).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownWarning:
    """One harmless warning of a dependency: which category, message and module, and why it is harmless."""

    category: type[Warning]
    message: str
    """Regex matched at the start of the message; no ':' in it (pytest's filter syntax splits on it)."""
    module: str
    """Regex matched at the start of the module the warning is attributed to."""
    why: str

    def pytest_filter(self) -> str:
        """The same filter as a pytest `filterwarnings` line."""
        category = self.category.__name__ if self.category.__module__ == "builtins" else \
            f"{self.category.__module__}.{self.category.__qualname__}"
        return f"ignore:{self.message}:{category}:{self.module}"


@dataclass(frozen=True)
class KnownLogLine:
    """One harmless log line of a dependency's logger."""

    logger: str
    message: str
    """Regex matched at the start of the formatted message."""
    why: str


KNOWN_WARNINGS: tuple[KnownWarning, ...] = (
    KnownWarning(
        UserWarning, r"The specified dataset source can be interpreted in multiple ways", r"mlflow\.data\.",
        "a cell's dataset input names its data file; MLflow finds the same local-file source class registered "
        "twice and says it picked it, which is the one meant"),
    KnownWarning(
        UserWarning, r"Hint\W+Inferred schema contains integer column", r"mlflow\.types\.",
        "the dataset input's schema only describes the instances a cell used; no model is served against it, "
        "so integer columns that cannot hold missing values never matter"),
    KnownWarning(
        DeprecationWarning, r"For backward compatibility, 'str' dtypes are (in|ex)cluded by select_dtypes",
        r"mlflow\.",
        "pandas 3 tells MLflow's log_table (it looks for image columns with select_dtypes('object')) to "
        "name string columns; the tables are logged whole either way"),
    KnownWarning(
        DeprecationWarning, r"Starting with pandas version 4\.0 all arguments of \w+ will be keyword-only",
        r"mlflow\.",
        "MLflow's dataset digest passes an argument to a DataFrame method by position, which pandas 3 still "
        "takes as before"),
    KnownWarning(
        DeprecationWarning, r"The ``noload`` loader strategy is deprecated", r"mlflow\.store\.",
        "SQLAlchemy 2.1 deprecates a query option MLflow's SQL store still uses when it creates a run; "
        "the runs it reads and writes are unchanged"),
    KnownWarning(
        DeprecationWarning, r"`torch\.jit\.\w+` is deprecated", r"torch\.jit\.",
        "TorchScript calls inside dependencies' model code (torch warns at every call); the project never "
        "scripts or traces a model itself"),
)

KNOWN_LOG_LINES: tuple[KnownLogLine, ...] = (
    KnownLogLine(
        "torchao", r"Failed to load .*torchao/_C",
        "transformers imports torchao when it is installed (the quant extra); its prebuilt CUDA kernels "
        "(MX-FP8, CUTLASS sm90a) do not load on a CPU or another Python, and nothing here uses them"),
    KnownLogLine(
        "torch.utils._pytree", r"<enum '\w+'> is an Enum subclass and is now natively supported by torch\.compile",
        "torchao registers its enums as pytree constants at import, which torch now deprecates; "
        "it concerns torch.compile inside torchao only"),
    KnownLogLine(
        "mlflow.store.db.utils", r"(Creating initial MLflow database tables|Updating database tables)",
        "MLflow creating the schema of a new SQLite store (tracking.store.prepare_store does it once, safely)"),
)


QUIET_ENVIRONMENT: dict[str, tuple[str, str]] = {
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": (
        "false",
        "MLflow draws a 'Downloading artifacts' bar for every artifact it reads back (a run's generations table, a "
        "report's files): hundreds of bar lines in the app's log and in a sweep's output, even with --no-progress, "
        "burying real errors"),
}
"""Environment switches that turn off a dependency's chatter: name -> (value, why). Set unless the environment
already names them (a user's own choice stays), so the processes a command starts inherit them."""


class _DropKnownLines(logging.Filter):
    """Drops a logger's records whose message starts with one of the known patterns."""

    def __init__(self, patterns: list[str]):
        super().__init__()
        self.pattern = re.compile("|".join(f"(?:{p})" for p in patterns))

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def quiet_dependencies() -> None:
    """Silence the known harmless warnings, log lines and bars of dependencies; safe to call more than once."""
    for name, (value, _why) in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    if not sys.warnoptions:
        for known in KNOWN_WARNINGS:
            warnings.filterwarnings("ignore", message=known.message, category=known.category, module=known.module)
    patterns: dict[str, list[str]] = {}
    for line in KNOWN_LOG_LINES:
        patterns.setdefault(line.logger, []).append(line.message)
    # A filter on the logger itself sees its records whatever handlers a dependency sets up (torch and
    # MLflow attach their own); it is installed before the dependency is imported, so import-time lines go too.
    for name, logger_patterns in patterns.items():
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, _DropKnownLines)]:
            logger.removeFilter(old)
        logger.addFilter(_DropKnownLines(logger_patterns))


PRINTED_WARNING = re.compile(r"^\S.*?:\d+: (?P<category>\w+): (?P<message>.*)$")
"""A warning as Python prints it to stderr: `<file>:<line>: <Category>: <message>` (its source line follows)."""


def known_output(line: str) -> bool:
    """Whether a line of a command's output is a known harmless warning or log line, as printed: for logs and
    output boxes of processes that did not filter it at the source (a child started without `quiet_dependencies`)."""
    printed = PRINTED_WARNING.match(line)
    if printed:
        category, message = printed.group("category"), printed.group("message")
        return any(known.category.__name__ == category and re.match(known.message, message)
                   for known in KNOWN_WARNINGS)
    # Log formats vary (`WARNING torchao: ...`, `[torchao] ...`): the logger's name, then its message.
    return any(re.search(rf"{re.escape(known.logger)}\W.*?(?:{known.message})", line) for known in KNOWN_LOG_LINES)


@contextmanager
def no_weight_loading_bar() -> Iterator[None]:
    """Without transformers' per-tensor "Loading weights" bar, for a metric's small scoring model.

    Metric models load offline in under a second, so their bar says nothing; a backend's large model
    keeps its bar. The bar setting is restored afterwards.
    """
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()
