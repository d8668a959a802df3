"""The reference lab's tools: read-only ones over real data shipped in ``lab/data``, and
one write tool.

Plain functions an agent may call; arguments and results are plain JSON:

- ``query_db(sql)``: one read-only ``SELECT`` on the course database (SQLite).
- ``read_docs(query, limit)``: the course documents ranked by matching words.
- ``search_repo(text, limit)``: lines of the lab's own Python source holding a text.
- ``web_search(query, limit)``: an offline web, the pages in ``lab/data/web``, ranked
  as ``read_docs`` ranks documents; recorded and replayed like the others.
- ``save_note(store, title, text)``: the write tool. It keeps a note in the run's
  ``store``, which starts empty at every run and is never recorded.

Every path is resolved from this file's folder, so the tools read the copy they
live in (a student's repository, the grader's sandbox copy) and never write:
the database is opened read-only three times over (a ``mode=ro`` URI,
``PRAGMA query_only`` and an authorizer that allows reads only). The same
arguments on the same files give the same answer on every run and machine.
A bad argument raises ``ToolError`` with a message that says what to change.

Rebuild ``course.db`` after editing ``course.sql`` with ``python -m lab.tools``.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from gradekit import Tools

__all__ = [
    "DB_PATH",
    "DOCS_DIR",
    "LAB_DIR",
    "MAX_ROWS",
    "READ_ONLY_TOOLS",
    "SQL_PATH",
    "TOOLS",
    "WEB_DIR",
    "WRITE_TOOLS",
    "ToolError",
    "build_database",
    "query_db",
    "read_docs",
    "save_note",
    "search_repo",
    "web_search",
]

LAB_DIR = Path(__file__).parent
SQL_PATH = LAB_DIR / "data" / "course.sql"
DB_PATH = LAB_DIR / "data" / "course.db"
DOCS_DIR = LAB_DIR / "data" / "docs"
WEB_DIR = LAB_DIR / "data" / "web"

MAX_ROWS = 50  # query_db returns at most this many rows, then says it stopped
MAX_DOCS = 10  # the largest read_docs limit
MAX_HITS = 50  # the largest search_repo limit
MAX_PAGES = 5  # the largest web_search limit
MAX_NOTES = 20  # notes one run's store holds
MAX_TITLE = 100
MAX_NOTE = 2_000
EXCERPT_CHARS = 400
LINE_CHARS = 200
TRUNCATED = "truncated"  # the key of query_db's last dict when rows were cut off

_MAX_SQL_CHARS = 10_000
_MAX_VALUE_BYTES = 100_000
_TICK = 10_000  # SQLite VM steps between two progress checks
_MAX_TICKS = 1_000  # so at most 10 million steps per query
_UNSTABLE = frozenset({"random", "randomblob", "current_date", "current_time", "current_timestamp"})
_CLOCK = re.compile(
    r"'now'|\b(?:date|time|datetime|julianday|unixepoch)\s*\(\s*\)|\bstrftime\s*\(\s*'[^']*'\s*\)",
    re.IGNORECASE,
)
_LEADING = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)
_WORD = re.compile(r"[^\W_]+")
_STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
        "how", "i", "if", "in", "is", "it", "its", "my", "of", "on", "or", "our", "should",
        "that", "the", "their", "this", "to", "was", "we", "what", "when", "where", "which",
        "who", "why", "will", "with", "you", "your",
    }
)  # fmt: skip


class ToolError(ValueError):
    """A tool refused its arguments or could not answer; the message says what to change."""


def query_db(sql: str) -> list[dict[str, object]]:
    """Run one read-only ``SELECT`` (or ``WITH ... SELECT``) on ``lab/data/course.db``.

    Returns the rows in the query's order, each a dict from column name to value
    (``None`` for NULL). At most ``MAX_ROWS`` rows: when the query has more, a
    last dict ``{"truncated": ...}`` says so. Anything else (a write, a PRAGMA,
    two statements, a clock or random function) raises ``ToolError``.
    """
    return _query(DB_PATH, sql)


def read_docs(query: str, limit: int = 3) -> list[dict[str, object]]:
    """Rank the course documents (``lab/data/docs/*.md``) by the words of ``query``.

    Words are runs of letters and digits, compared without case; common words
    such as "the" are ignored. A document's score is how many distinct query
    words it contains; ties go to the earlier file name, documents with no
    match are left out. Each result is ``{"doc", "score", "excerpt"}``, the
    excerpt being the first paragraph with a query word, capped in length.
    """
    return _read_docs(DOCS_DIR, query, limit)


def search_repo(text: str, limit: int = 10) -> list[dict[str, object]]:
    """Find the lines of the lab's own source (``lab/*.py``) holding ``text`` literally.

    Case-sensitive, one line at a time; results are ``{"path", "line", "text"}``
    with ``path`` like ``lab/agent.py`` and ``line`` counted from 1, in path
    then line order, at most ``limit`` of them. Nothing outside ``lab/`` is read.
    """
    return _search(LAB_DIR, text, limit)


def web_search(query: str, limit: int = 3) -> list[dict[str, object]]:
    """Search the offline web: the pages in ``lab/data/web``, ranked by the words of ``query``.

    Scored and ordered as ``read_docs`` does (distinct query words a page holds; ties by
    URL; pages with none left out). Each result is ``{"url", "title", "score",
    "snippet"}``, the snippet being the page's first paragraph with a query word.
    """
    return _web_search(WEB_DIR, query, limit)


def save_note(store: dict[str, Any], title: str, text: str) -> dict[str, object]:
    """Keep the note ``title``: ``text`` in this run's ``store`` (empty when a run starts).

    Returns ``{"saved", "count", "titles"}``: the note's title, how many notes the store
    now holds and their titles in the order saved, so a run sees only its own notes.
    """
    for name, value, most in (("title", title, MAX_TITLE), ("text", text, MAX_NOTE)):
        if not isinstance(value, str) or not value.strip() or len(value) > most:
            raise ToolError(f"save_note needs a non-empty {name} of at most {most} characters")
    notes: list[dict[str, str]] = store.setdefault("notes", [])
    if len(notes) >= MAX_NOTES:
        raise ToolError(f"save_note keeps at most {MAX_NOTES} notes a run; save fewer")
    notes.append({"title": title, "text": text})
    return {"saved": title, "count": len(notes), "titles": [note["title"] for note in notes]}


READ_ONLY_TOOLS: dict[str, Callable[..., object]] = {
    "query_db": query_db,
    "read_docs": read_docs,
    "search_repo": search_repo,
    "web_search": web_search,
}
WRITE_TOOLS: dict[str, Callable[..., object]] = {"save_note": save_note}


def _registry() -> Tools:
    tools = Tools()
    for name, function in READ_ONLY_TOOLS.items():
        tools.read_only(name, function)
    for name, function in WRITE_TOOLS.items():
        tools.write(name, function)
    return tools


TOOLS = _registry()
"""The reference lab's tools, as the manifest names them (``tools = "lab.tools:TOOLS"``)."""


def build_database(sql_path: Path, db_path: Path) -> None:
    """Build ``db_path`` from the SQL script ``sql_path``: same script, same rows, every time.

    The file is built beside its destination and moved into place only when the
    whole script ran with foreign keys enforced, so a failed build leaves the
    previous database untouched.
    """
    script = sql_path.read_text(encoding="utf-8")
    partial = db_path.with_name(db_path.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        with closing(sqlite3.connect(partial, isolation_level=None)) as conn:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.executescript(script)
            conn.execute("VACUUM")
        os.replace(partial, db_path)
    finally:
        partial.unlink(missing_ok=True)


# --- query_db ---------------------------------------------------------------------------


class _Guard:
    """A connection's authorizer and progress handler: reads only, bounded work."""

    def __init__(self) -> None:
        self.refusal = ""
        self.ticks = 0

    def authorize(self, action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
        """Allow reads; remember why the first refused action was refused."""
        refusal = _refusal(action, arg2)
        if not refusal:
            return sqlite3.SQLITE_OK
        self.refusal = self.refusal or refusal
        return sqlite3.SQLITE_DENY

    def progress(self) -> int:
        """Called every ``_TICK`` steps; a non-zero answer interrupts the query."""
        self.ticks += 1
        return int(self.ticks > _MAX_TICKS)


def _refusal(action: int, arg2: str | None) -> str:
    """Why SQLite's ``action`` is refused, or ``""`` when it only reads.

    PRAGMA functions are refused too (reading them can touch ``sqlite_master`` as an
    update); the schema is readable as ``SELECT sql FROM sqlite_master``.
    """
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return ""
    if action == sqlite3.SQLITE_FUNCTION:
        name = (arg2 or "").lower()
        return f"calls {name}(), whose answer changes from run to run" if name in _UNSTABLE else ""
    return "would do more than read (only a read-only SELECT is allowed)"


def _query(db_path: Path, sql: str) -> list[dict[str, object]]:
    """``query_db`` on any database file: check, run, convert."""
    _check_sql(sql)
    guard = _Guard()
    try:
        with closing(_connect(db_path, guard)) as conn:
            cursor = conn.execute(sql)
            rows = cursor.fetchmany(MAX_ROWS + 1)
            columns = _columns(cursor.description)
    except sqlite3.Error as exc:
        raise ToolError(_explain(exc, guard)) from exc
    return _to_dicts(columns, rows)


def _check_sql(sql: object) -> None:
    """Refuse what is plainly not one deterministic SELECT, before SQLite sees it."""
    if not isinstance(sql, str):
        raise ToolError(f"query_db needs the SQL as a string, not {type(sql).__name__}")
    leading = _LEADING.match(sql)
    rest = sql[leading.end() :] if leading else sql
    first = re.match(r"[A-Za-z]+", rest)
    if first is None or first.group().upper() not in ("SELECT", "WITH"):
        word = first.group().upper() if first else rest[:20] or "nothing"
        raise ToolError(
            f"query_db runs a single read-only SELECT (or WITH ... SELECT); this starts with {word}"
        )
    if _CLOCK.search(sql):
        raise ToolError(
            "query_db refused this SQL: it reads the current date or time, so its answer "
            "changes from day to day; use a fixed date such as '2025-12-01'"
        )


def _connect(db_path: Path, guard: _Guard) -> sqlite3.Connection:
    """Open ``db_path`` read-only, with the guard's authorizer and progress handler."""
    uri = db_path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, _MAX_SQL_CHARS)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
        conn.set_authorizer(guard.authorize)
        conn.set_progress_handler(guard.progress, _TICK)
    except BaseException:
        conn.close()
        raise
    return conn


def _explain(exc: sqlite3.Error, guard: _Guard) -> str:
    """A message for a failed query that says what to change."""
    if guard.refusal:
        return f"query_db refused this SQL: it {guard.refusal}"
    if guard.ticks > _MAX_TICKS:
        steps = _TICK * _MAX_TICKS
        return f"query_db stopped this query after {steps:,} steps; add a LIMIT or a WHERE clause"
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in str(exc):
        return "query_db runs a single read-only SELECT; send one statement, not several"
    return f"query_db could not run this SQL: {exc}"


def _columns(description: Sequence[Sequence[Any]]) -> list[str]:
    """The result's column names; two columns of one name would lose a value, so refuse."""
    names = [str(column[0]) for column in description]
    for name in names:
        if names.count(name) > 1:
            raise ToolError(f"the result has two columns named {name!r}; rename one with AS")
    return names


def _to_dicts(columns: list[str], rows: list[Any]) -> list[dict[str, object]]:
    """Rows as dicts of JSON values, cut to ``MAX_ROWS`` with a note when there were more."""
    result: list[dict[str, object]] = [
        {name: _json_value(value) for name, value in zip(columns, row, strict=True)}
        for row in rows[:MAX_ROWS]
    ]
    if len(rows) > MAX_ROWS:
        note = f"only the first {MAX_ROWS} rows are shown; add a LIMIT or a narrower WHERE"
        result.append({TRUNCATED: note})
    return result


def _json_value(value: object) -> object:
    """A SQLite value as JSON: text, integer, finite real or None."""
    if isinstance(value, bytes):
        raise ToolError("the result holds a BLOB, which is not JSON; select hex(...) of it")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"the result holds {value}, which is not JSON; cast it to TEXT")
    return value


# --- read_docs and search_repo ------------------------------------------------------------


def _read_docs(docs_dir: Path, query: str, limit: int) -> list[dict[str, object]]:
    """``read_docs`` over any folder of ``*.md`` files."""
    _check_limit("read_docs", limit, MAX_DOCS)
    wanted = _query_words(query)
    scored = []
    for path in _files(docs_dir, "*.md"):
        text = path.read_text(encoding="utf-8", errors="replace")
        score = len(wanted & set(_words(text)))
        if score:
            scored.append((-score, path.name, text))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [
        {"doc": name, "score": -negative, "excerpt": _excerpt(text, wanted)}
        for negative, name, text in scored[:limit]
    ]


def _query_words(query: object, tool: str = "read_docs") -> frozenset[str]:
    """The searchable words of a query; none at all is an error."""
    if not isinstance(query, str):
        raise ToolError(f"{tool} needs the query as a string, not {type(query).__name__}")
    wanted = frozenset(_words(query)) - _STOP_WORDS
    if not wanted:
        raise ToolError(f"{tool} found no searchable word in {query[:80]!r}; name a topic")
    return wanted


def _web_search(web_dir: Path, query: str, limit: int) -> list[dict[str, object]]:
    """``web_search`` over any folder of pages: ``url:`` and ``title:`` lines, a blank line,
    then the page's text."""
    _check_limit("web_search", limit, MAX_PAGES)
    wanted = _query_words(query, "web_search")
    scored = []
    for path in _files(web_dir, "*.md"):
        head, _, body = path.read_text(encoding="utf-8", errors="replace").partition("\n\n")
        fields = dict(line.partition(": ")[::2] for line in head.splitlines())
        url, title = fields.get("url", path.name), fields.get("title", path.stem)
        score = len(wanted & set(_words(f"{title}\n{body}")))
        if score:
            scored.append((-score, url, title, body))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [
        {"url": url, "title": title, "score": -negative, "snippet": _excerpt(body, wanted)}
        for negative, url, title, body in scored[:limit]
    ]


def _words(text: str) -> list[str]:
    """Lower-cased runs of letters and digits."""
    return _WORD.findall(text.lower())


def _excerpt(text: str, wanted: frozenset[str]) -> str:
    """The first body paragraph holding a wanted word (else the first one), capped."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text)]
    body = [p for p in paragraphs if p and not p.startswith("#")] or [""]
    first = next((p for p in body if wanted & set(_words(p))), body[0])
    return _cap(first, EXCERPT_CHARS)


def _search(lab_dir: Path, text: str, limit: int) -> list[dict[str, object]]:
    """``search_repo`` over any package folder's ``*.py`` files."""
    _check_limit("search_repo", limit, MAX_HITS)
    if not isinstance(text, str) or not text or "\n" in text:
        raise ToolError("search_repo needs a non-empty text on one line")
    hits: list[dict[str, object]] = []
    for path in _files(lab_dir, "*.py"):
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        for number, line in enumerate(lines, start=1):
            if text in line:
                where = path.relative_to(lab_dir.parent).as_posix()
                hits.append({"path": where, "line": number, "text": _cap(line.strip(), LINE_CHARS)})
                if len(hits) == limit:
                    return hits
    return hits


def _files(folder: Path, pattern: str) -> list[Path]:
    """Files directly in ``folder`` matching ``pattern``, sorted; links leading out are skipped."""
    root = folder.resolve()
    return [
        path
        for path in sorted(folder.glob(pattern))
        if path.is_file() and path.resolve().parent == root
    ]


def _check_limit(tool: str, limit: object, most: int) -> None:
    """A limit is an integer from 1 to ``most``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise ToolError(f"{tool} needs a limit from 1 to {most}, not {limit!r}")


def _cap(text: str, most: int) -> str:
    """``text`` cut to at most ``most`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= most else text[: most - 1].rstrip() + "…"


if __name__ == "__main__":
    build_database(SQL_PATH, DB_PATH)
    print(f"built {DB_PATH} from {SQL_PATH}")
