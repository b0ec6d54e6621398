"""Instances files (passages with one blank): load, validate, save, and derive sentences and domain.

Files follow the published benchmark's columns
``dataset, ref_id, source_text, problem, gold_answer, unit, n, unit_idx`` as CSV or JSONL.
The published file is accepted as it is: extra columns (including an unnamed pandas index
column) are ignored and a numeric ``ref_id`` is read as text.

Blank rule: a run of three or more underscores counts as one blank. The project writes blanks
as exactly six underscores (``BLANK``), but the published examples also use longer runs such as
``________``; counting any run of 3+ as a single blank accepts both without ever reading two
adjacent runs as one. A problem must hold exactly one blank. Problems are kept verbatim (the
blank is not rewritten), so prompts show the text exactly as the file has it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from narrative_eval.data.errors import DataError, DataErrors
from narrative_eval.data.jsonl import read_jsonl
from narrative_eval.errors import read_text
from narrative_eval.records import InfillingInstance

BLANK = "______"
"""The blank the project writes: exactly six underscores."""

BLANK_RE = re.compile(r"_{3,}")
"""What counts as a blank when reading: any run of three or more underscores."""

EOS = " <eos> "
"""Sentence separator used in ``source_text``."""

COLUMNS: tuple[str, ...] = ("dataset", "ref_id", "source_text", "problem", "gold_answer", "unit", "n", "unit_idx")
"""Required columns, in the published order (also the order files are written in)."""

DEFAULT_UNIT = "sentence(s)"
"""Unit written when a row leaves ``unit`` empty."""


DOMAINS: tuple[str, ...] = ("encyclopedic", "news", "story", "visual")
"""The four narrative domains of the study."""

# Normalised dataset name -> domain. Published names, their common short forms, and the
# names the shipped benchmark uses (which are the domain names themselves).
_DOMAIN_ALIASES: dict[str, str] = {
    "wikipedia": "encyclopedic",
    "wiki": "encyclopedic",
    "encyclopedic": "encyclopedic",
    "encyclopedia": "encyclopedic",
    "cnn_dailymail": "news",
    "cnn_dm": "news",
    "cnndm": "news",
    "cnn": "news",
    "dailymail": "news",
    "daily_mail": "news",
    "news": "news",
    "rocstories": "story",
    "roc_stories": "story",
    "roc": "story",
    "story": "story",
    "stories": "story",
    "sind": "visual",
    "vist": "visual",
    "visual": "visual",
    "visual_narrative": "visual",
}
# Prefixes tried when no alias matches exactly (e.g. 'wikipedia_2019', 'rocstories-test').
_DOMAIN_PREFIXES: tuple[tuple[str, str], ...] = (
    ("wiki", "encyclopedic"),
    ("encyclop", "encyclopedic"),
    ("cnn", "news"),
    ("dailymail", "news"),
    ("news", "news"),
    ("rocstor", "story"),
    ("stor", "story"),
    ("sind", "visual"),
    ("vist", "visual"),
    ("visual", "visual"),
)

# Words that end with a period without ending the sentence. Short forms that are also
# ordinary words (sun, sat, wed, no, fig) are left out or listed below.
_ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft rev gen col lt sgt capt cmdr adm gov sen rep pres supt insp
    vs etc e.g i.e cf al approx ca dept univ inc ltd co corp bros
    jan feb aug sept oct nov dec
    a.m p.m u.s u.k u.n e.u d.c u.s.a ph.d b.a m.a
    """.split()
)
# Abbreviations only when a number follows ('No. 5', 'Fig. 2', 'p. 14').
_NUMBER_ABBREVIATIONS = frozenset("no nos fig figs vol p pp".split())
# Candidate sentence ends: terminal punctuation, optional closing quotes/brackets, then space.
_CANDIDATE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+")
# A following sentence starts with a capital, a digit, or an opening quote/bracket.
_SENTENCE_START = re.compile(r"[\"'\u201c\u2018(\[]*[A-Z0-9]")


# --------------------------------------------------------------------------- derived fields


def count_blanks(problem: str) -> int:
    """Number of blanks in a problem (runs of 3+ underscores)."""
    return len(BLANK_RE.findall(problem))


def split_problem(problem: str) -> tuple[str, str]:
    """The text before and after the single blank of a problem (raises ValueError unless exactly one)."""
    matches = list(BLANK_RE.finditer(problem))
    if len(matches) != 1:
        raise ValueError(f"expected exactly one blank, found {len(matches)}")
    match = matches[0]
    return problem[: match.start()], problem[match.end() :]


def sentences(source_text: str) -> list[str]:
    """Split a passage into sentences.

    Uses the ``<eos>`` separators when the text has them; otherwise a rule-based splitter that
    ends sentences at . ! ? followed by a capitalised word, except after common abbreviations
    (Mr., Dr., U.S., e.g., month names ...) and single-letter initials.
    """
    if "<eos>" in source_text:
        return [part.strip() for part in re.split(r"\s*<eos>\s*", source_text) if part.strip()]
    text = source_text.strip()
    if not text:
        return []
    result: list[str] = []
    start = 0
    for match in _CANDIDATE_END.finditer(text):
        end = match.end()
        if not _SENTENCE_START.match(text, end):
            continue
        if _ends_with_abbreviation(text[start : match.start() + 1], next_is_number=text[end : end + 1].isdigit()):
            continue
        result.append(text[start:end].strip())
        start = end
    tail = text[start:].strip()
    if tail:
        result.append(tail)
    return result


def _ends_with_abbreviation(chunk: str, next_is_number: bool = False) -> bool:
    """True when the last word of ``chunk`` (which ends in '.') is an abbreviation or an initial."""
    if not chunk.endswith("."):
        return False
    words = chunk.split()
    if not words:
        return False
    word = words[-1].lstrip("\"'\u201c\u2018([").rstrip(".").lower()
    if len(word) == 1 and word.isalpha():
        return True  # an initial such as the 'J.' in 'J. Smith'
    return word in _ABBREVIATIONS or (next_is_number and word in _NUMBER_ABBREVIATIONS)


def domain(dataset: str) -> str:
    """The narrative domain (encyclopedic, news, story, visual) of a dataset name.

    Knows the published names (wikipedia, cnn_dailymail, rocstories, sind) with their short
    forms and the shipped names; any other name is returned normalised, as its own domain.
    """
    key = re.sub(r"[\s\-]+", "_", dataset.strip().lower())
    if key in _DOMAIN_ALIASES:
        return _DOMAIN_ALIASES[key]
    for prefix, name in _DOMAIN_PREFIXES:
        if key.startswith(prefix):
            return name
    return key


# --------------------------------------------------------------------------- loading


def load_instances(path: str | Path) -> list[InfillingInstance]:
    """Read and validate an instances file (.csv, or .jsonl/.ndjson).

    Raises DataErrors listing every bad row as ``file:line: message`` (CSV header = line 1;
    a record spanning several physical lines is reported at the line where it starts), or naming
    the file when it holds no instances at all.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _read_csv(path)
    elif suffix in (".jsonl", ".ndjson"):
        rows = _read_jsonl(path)
    else:
        raise DataErrors([DataError(path, None, f"unsupported file type {suffix!r} (use .csv or .jsonl)")])
    rows = list(rows)  # read (and decode) the whole file before validating
    if not rows:  # a header alone (or blank lines) would run a sweep on nothing and report it as done
        found = "its header and no rows" if suffix == ".csv" else "no records (one JSON object per line)"
        raise DataErrors([DataError(path, None, f"no instances: the file has {found}")])
    instances: list[InfillingInstance] = []
    errors: list[DataError] = []
    for line, row in rows:
        if isinstance(row, DataError):
            errors.append(row)
            continue
        problems, instance = _validate(row)
        errors.extend(DataError(path, line, message) for message in problems)
        if instance is not None:
            instances.append(instance)
    if errors:
        raise DataErrors(errors)
    return instances


def _read_csv(path: Path) -> Iterator[tuple[int, dict[str, Any] | DataError]]:
    """Yield (start line, row dict) per record; a missing column is one error at the header line."""
    # Long passages can exceed the csv module's default 128 KiB field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 24))
    # Decoded whole (UTF-8 or UTF-16 with a byte-order mark); newline="" keeps quoted newlines for csv.
    with io.StringIO(read_text(path, "instances file"), newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            yield 1, DataError(path, 1, "empty file: no header row")
            return
        except csv.Error as exc:
            yield 1, DataError(path, 1, f"unreadable CSV header: {exc}")
            return
        header = [name.strip() for name in header]
        missing = [name for name in COLUMNS if name not in header]
        if missing:
            found = ", ".join(name for name in header if name) or "none"
            yield 1, DataError(path, 1, f"missing column(s): {', '.join(missing)} (the header has: {found})")
            return
        index = {name: header.index(name) for name in COLUMNS}
        # reader.line_num counts physical lines consumed so far, so a record starts one line
        # after where the previous record ended, however many quoted newlines it holds.
        last_line = reader.line_num
        while True:
            start = last_line + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield start, DataError(path, start, f"unreadable CSV record: {exc}")
                return
            last_line = reader.line_num
            if not record or all(not cell.strip() for cell in record):
                continue  # blank lines carry no record
            if len(record) < len(header):
                record = record + [""] * (len(header) - len(record))
            yield start, {name: record[i] for name, i in index.items()}


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | DataError]]:
    """Yield (line, object) per non-blank line; bad JSON and missing fields become errors."""
    for line_no, record in read_jsonl(path, "instances file"):
        missing = [] if isinstance(record, DataError) else [name for name in COLUMNS if name not in record]
        if missing:
            yield line_no, DataError(path, line_no, f"missing field(s): {', '.join(missing)}")
            continue
        yield line_no, record


def _as_text(value: Any) -> str:
    """Cell value as text (JSON null becomes '')."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _as_ref_id(value: Any) -> str:
    """A passage id as text; integral numbers lose a '.0' that pandas adds to numeric id columns."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = _as_text(value).strip()
    if re.fullmatch(r"-?\d+\.0+", text):
        return text.split(".")[0]
    return text


def _as_int(value: Any) -> int | None:
    """An integer from an int, an integral float, or their text; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        if re.fullmatch(r"[+-]?\d+\.0*", text):
            return int(float(text))
    return None


def _validate(row: dict[str, Any]) -> tuple[list[str], InfillingInstance | None]:
    """Every problem with one row, and the instance when there is none."""
    problems: list[str] = []
    dataset = _as_text(row["dataset"]).strip()
    ref_id = _as_ref_id(row["ref_id"])
    source_text = _as_text(row["source_text"])
    problem = _as_text(row["problem"])
    gold = _as_text(row["gold_answer"])
    unit = _as_text(row["unit"]).strip() or DEFAULT_UNIT
    if not dataset:
        problems.append("empty dataset")
    if not ref_id:
        problems.append("empty ref_id")
    if not source_text.strip():
        problems.append("empty source_text")
    if not problem.strip():
        problems.append("empty problem")
    else:
        blanks = count_blanks(problem)
        if blanks == 0:
            problems.append("problem has no blank (expected one run of 3+ underscores, e.g. '______')")
        elif blanks > 1:
            problems.append(f"problem has {blanks} blanks (expected exactly one)")
    n = _as_int(row["n"])
    if n is None or not 1 <= n <= 3:
        problems.append(f"n must be an integer from 1 to 3, got {row['n']!r}")
    if not gold.strip():
        problems.append("empty gold_answer")
    unit_idx = _as_int(row["unit_idx"])
    if unit_idx is None or unit_idx < 0:
        problems.append(f"unit_idx must be a non-negative integer, got {row['unit_idx']!r}")
    if problems:
        return problems, None
    instance = InfillingInstance(
        dataset=dataset,
        ref_id=ref_id,
        source_text=source_text,
        problem=problem,
        gold_answer=gold,
        unit=unit,
        n=n,
        unit_idx=unit_idx,
    )
    return [], instance


# --------------------------------------------------------------------------- saving


def save_instances(instances: Iterable[InfillingInstance], path: str | Path) -> Path:
    """Write instances as CSV or JSONL (chosen by the suffix) in the published column order."""
    path = Path(path)
    suffix = path.suffix.lower()
    rows = [{name: getattr(instance, name) for name in COLUMNS} for instance in instances]
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
            writer.writeheader()
            writer.writerows(rows)
    elif suffix in (".jsonl", ".ndjson"):
        with path.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        raise ValueError(f"unsupported file type {suffix!r} for {path} (use .csv or .jsonl)")
    return path
