"""Make WordNet available to NLTK without a download, for METEOR's synonym matching.

No PyPI package carries WordNet. Debian's `wordnet-base` and `wordnet-sense-index` packages install
the WordNet 3.0 database under /usr/share/wordnet, which is what NLTK's `corpora/wordnet` holds,
except for the `lexnames` file; that file's content is documented as a table in the lexnames(5WN)
man page, which we parse to rebuild it.

Run once (idempotent):

    apt-get install -y wordnet-base wordnet-sense-index
    python -m narrative_eval.metrics.wordnet

`ensure_wordnet()` does the same lazily from METEOR, so the command (`__main__.py`) is only needed to prepare a
machine ahead of time or to see what went wrong.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import socket
import threading
from pathlib import Path

SYSTEM_WORDNET_DIR = Path("/usr/share/wordnet")
"""Where Debian's wordnet-base installs the database files."""
LEXNAMES_MAN_PAGE = Path("/usr/share/man/man5/lexnames.5WN.gz")
"""The lexnames(5WN) man page, whose table is the lexnames file's content."""
SETUP_COMMAND = "apt-get install -y wordnet-base wordnet-sense-index && python -m narrative_eval.metrics.wordnet"
"""What a user runs when WordNet cannot be found."""

# Files NLTK's WordNetCorpusReader reads; the rest of /usr/share/wordnet (bin/, pixmaps/) is the browser.
_REQUIRED_FILES = (
    "lexnames",
    *(f"index.{pos}" for pos in ("noun", "verb", "adj", "adv")),
    *(f"data.{pos}" for pos in ("noun", "verb", "adj", "adv")),
    *(f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")),
)

_lock = threading.Lock()
_ready_dir: Path | None = None


class WordNetUnavailable(RuntimeError):
    """WordNet could not be installed into the NLTK data directory."""


def default_nltk_data_dir() -> Path:
    """NLTK data directory to install into: $NLTK_DATA's first entry, else <repo root>/.cache/nltk_data."""
    env = os.environ.get("NLTK_DATA", "").strip()
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return _repo_root() / ".cache" / "nltk_data"


def _repo_root() -> Path:
    # Source checkouts keep pyproject.toml at the root; an installed copy falls back to the cwd's root.
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if (folder / "pyproject.toml").is_file() and (folder / "platform" / "narrative_eval").is_dir():
                return folder
    return Path.cwd()


def parse_lexnames_man_page(man_page_text: str) -> list[tuple[int, str, int]]:
    """(file number, lexicographer file name, syntactic category number) rows from lexnames(5WN).

    The man page lists 'number<TAB>name<TAB>contents'; the category number comes from the page's own
    'Syntactic Category' table (1 NOUN, 2 VERB, 3 ADJECTIVE, 4 ADVERB) matched on the name's prefix.
    """
    category_by_word: dict[str, int] = {}
    for match in re.finditer(r"^\\fB(\d)\\fP\s+([A-Z]+)\s*$", man_page_text, re.MULTILINE):
        category_by_word[match.group(2)] = int(match.group(1))
    prefix_to_word = {"noun": "NOUN", "verb": "VERB", "adj": "ADJECTIVE", "adv": "ADVERB"}
    rows = []
    for match in re.finditer(r"^(\d{2})\t\s*([a-z]+)\.(\w+)\s*\t", man_page_text, re.MULTILINE):
        prefix = match.group(2)
        word = prefix_to_word.get(prefix)
        if word is None or word not in category_by_word:
            raise WordNetUnavailable(f"unexpected lexicographer file {prefix}.{match.group(3)} in lexnames(5WN)")
        rows.append((int(match.group(1)), f"{prefix}.{match.group(3)}", category_by_word[word]))
    if [number for number, _, _ in rows] != list(range(len(rows))) or not rows:
        raise WordNetUnavailable("could not read a contiguous lexnames table from the lexnames(5WN) man page")
    return rows


def format_lexnames(rows: list[tuple[int, str, int]]) -> str:
    """The lexnames file: one 'NN<TAB>name<TAB>category' line per lexicographer file."""
    return "".join(f"{number:02d}\t{name}\t{category}\n" for number, name, category in rows)


def install_from_system(
    target_root: Path, source_dir: Path = SYSTEM_WORDNET_DIR, man_page: Path = LEXNAMES_MAN_PAGE
) -> Path:
    """Copy the system WordNet into <target_root>/corpora/wordnet and write its lexnames file."""
    if not (source_dir / "data.noun").is_file():
        raise WordNetUnavailable(f"no WordNet database in {source_dir} (install wordnet-base)")
    if not man_page.is_file():
        raise WordNetUnavailable(f"no lexnames(5WN) man page at {man_page} (install wordnet-base)")
    rows = parse_lexnames_man_page(gzip.decompress(man_page.read_bytes()).decode("utf-8", "replace"))
    corpus_dir = target_root / "corpora" / "wordnet"
    # Build in a sibling folder and rename, so a reader never sees a half-copied corpus.
    staging = corpus_dir.with_name(f".wordnet.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for path in source_dir.iterdir():
        if path.is_file():
            shutil.copy2(path, staging / path.name)
    (staging / "lexnames").write_text(format_lexnames(rows), encoding="utf-8")
    if corpus_dir.exists() and not _corpus_complete(corpus_dir):
        shutil.rmtree(corpus_dir, ignore_errors=True)
    try:
        staging.rename(corpus_dir)
    except OSError:
        # Another process finished the same copy first; its result is as good as ours.
        shutil.rmtree(staging, ignore_errors=True)
        if not _corpus_complete(corpus_dir):
            raise
    return corpus_dir


def _corpus_complete(corpus_dir: Path) -> bool:
    return all((corpus_dir / name).is_file() for name in _REQUIRED_FILES)


def _add_to_nltk_path(root: Path) -> None:
    import nltk

    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))


def _network_available(host: str = "raw.githubusercontent.com", port: int = 443, timeout: float = 3.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _nltk_already_has_wordnet() -> bool:
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
        return True
    except LookupError:
        try:
            nltk.data.find("corpora/wordnet.zip")
            return True
        except LookupError:
            return False


def verify_wordnet() -> int:
    """Load NLTK's WordNet and return how many synsets 'dog' has (must be > 0)."""
    from nltk.corpus import wordnet

    count = len(wordnet.synsets("dog"))
    if count == 0:
        raise WordNetUnavailable("NLTK's WordNet loaded but found no synsets for 'dog'")
    return count


def ensure_wordnet(nltk_data_dir: Path | None = None) -> Path:
    """Make `nltk.corpus.wordnet` loadable in this process; return the NLTK data root used.

    Order: an existing complete copy under the data dir; a fresh copy from the system WordNet;
    WordNet that NLTK already finds elsewhere; `nltk.download('wordnet')` when the network answers.
    Otherwise raises WordNetUnavailable naming the setup command.
    """
    global _ready_dir
    with _lock:
        if _ready_dir is not None and nltk_data_dir in (None, _ready_dir):
            return _ready_dir
        root = Path(nltk_data_dir) if nltk_data_dir is not None else default_nltk_data_dir()
        corpus_dir = root / "corpora" / "wordnet"
        problems: list[str] = []
        if not _corpus_complete(corpus_dir):
            try:
                install_from_system(root)
            except (WordNetUnavailable, OSError) as error:
                problems.append(f"system copy: {error}")
        if _corpus_complete(corpus_dir):
            _add_to_nltk_path(root)
        elif not _nltk_already_has_wordnet():
            if _network_available():
                import nltk

                root.mkdir(parents=True, exist_ok=True)
                if nltk.download("wordnet", download_dir=str(root), quiet=True, raise_on_error=False):
                    _add_to_nltk_path(root)
                else:
                    problems.append("nltk.download('wordnet') failed")
            else:
                problems.append("no network for nltk.download('wordnet')")
            if not _nltk_already_has_wordnet():
                raise WordNetUnavailable(
                    "METEOR needs WordNet and none could be set up (" + "; ".join(problems) + "). "
                    f"Run: {SETUP_COMMAND}"
                )
        _ready_dir = root
        return root
