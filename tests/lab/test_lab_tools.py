"""The reference lab's read-only tools against the real data shipped in ``lab/data``
(``web_search`` and the write tool ``save_note``: ``test_lab_web_and_notes.py``)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tomllib
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from lab import tools
from lab.tools import (
    DB_PATH,
    DOCS_DIR,
    LAB_DIR,
    MAX_ROWS,
    READ_ONLY_TOOLS,
    SQL_PATH,
    TOOLS,
    WRITE_TOOLS,
    ToolError,
    build_database,
    query_db,
    read_docs,
    save_note,
    search_repo,
    web_search,
)

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"cohorts", "students", "purchases", "refunds", "submissions", "grading_runs"}
DOCS = {
    "grading-policy.md",
    "incident-runbook.md",
    "late-submissions.md",
    "rate-limits-and-retries.md",
    "recording-cassettes.md",
    "refund-policy.md",
}


def _dump(db: Path) -> dict[str, object]:
    """Every table's schema and rows (in rowid order) of a database file, opened read-only."""
    with closing(sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)) as conn:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [name for kind, name, _ in schema if kind == "table"]
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
    return {"schema": schema, "rows": rows}


def _source_rows(table: str) -> list[dict[str, object]]:
    """A table's rows as course.sql says them: the script run in memory, no build_database."""
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(SQL_PATH.read_text(encoding="utf-8"))
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid")]


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: its SHA-256 and modification time."""
    return {
        str(path.relative_to(folder)): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mtime_ns,
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


# --- the database file ------------------------------------------------------------------


def test_committed_database_holds_exactly_what_course_sql_says(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    build_database(SQL_PATH, fresh)
    committed, built = _dump(DB_PATH), _dump(fresh)
    assert committed == built
    rows = built["rows"]
    assert isinstance(rows, dict) and set(rows) == TABLES
    assert all(rows[table] for table in TABLES)  # no table compared empty against empty


def test_build_database_replaces_atomically_and_leaves_nothing_behind(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    db.write_bytes(b"an old file that is not a database")
    build_database(SQL_PATH, db)
    first = _dump(db)
    build_database(SQL_PATH, db)
    assert _dump(db) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["course.db"]


def test_a_failed_build_keeps_the_previous_database(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    build_database(SQL_PATH, db)
    before = db.read_bytes()
    bad = tmp_path / "bad.sql"
    bad.write_text(
        SQL_PATH.read_text(encoding="utf-8")
        + "\nINSERT INTO purchases VALUES (99, 'nobody', '2025-spring', '2025-01-01', 1);\n",
        encoding="utf-8",
    )
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        build_database(bad, db)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sql", "course.db"]


# --- query_db: answers --------------------------------------------------------------------


def test_the_sql_explain_query_counts_passing_submissions_per_student() -> None:
    passed = Counter(
        row["student"]
        for row in _source_rows("submissions")
        if isinstance(row["score"], int) and row["score"] >= 60
    )
    got = query_db(
        "SELECT student, COUNT(*) FROM submissions WHERE score >= 60 "
        "GROUP BY student ORDER BY student"
    )
    assert got == [{"student": s, "COUNT(*)": n} for s, n in sorted(passed.items())]
    assert got[0] == {"student": "ada", "COUNT(*)": 3}


def test_a_join_returns_rows_in_the_querys_order_with_nulls_and_accents() -> None:
    names = {row["handle"]: row["name"] for row in _source_rows("students")}
    buyers = {row["id"]: row["student"] for row in _source_rows("purchases")}
    refunds = sorted(_source_rows("refunds"), key=lambda r: (-int(str(r["amount_cents"])), r["id"]))
    got = query_db(
        "SELECT s.name, r.amount_cents FROM refunds r "
        "JOIN purchases p ON p.id = r.purchase_id JOIN students s ON s.handle = p.student "
        "ORDER BY r.amount_cents DESC, r.id"
    )
    assert got == [
        {"name": names[buyers[r["purchase_id"]]], "amount_cents": r["amount_cents"]}
        for r in refunds
    ]
    assert {"name": "Léa Fontaine", "amount_cents": 67500} in got
    ungraded = query_db("SELECT id, score FROM submissions WHERE score IS NULL")
    assert ungraded == [{"id": 14, "score": None}]


def test_every_refund_in_the_database_follows_the_refund_policy() -> None:
    rows = query_db(
        "SELECT p.purchased_on, p.amount_cents AS paid, r.requested_on, r.amount_cents AS refund "
        "FROM refunds r JOIN purchases p ON p.id = r.purchase_id ORDER BY r.id"
    )
    shares = []
    for row in rows:
        days = (
            dt.date.fromisoformat(str(row["requested_on"]))
            - dt.date.fromisoformat(str(row["purchased_on"]))
        ).days
        share = 1.0 if days <= 14 else 0.5 if days <= 30 else 0.0
        assert row["refund"] == int(int(str(row["paid"])) * share), row
        shares.append(share)
    assert sorted(set(shares)) == [0.0, 0.5, 1.0]  # all three branches are in the data


def test_the_incident_of_the_incident_summary_case_is_in_the_database() -> None:
    failed = query_db(
        "SELECT started_at, finished_at, ungraded, note FROM grading_runs WHERE status = 'failed'"
    )
    assert len(failed) == 1
    assert failed[0]["finished_at"] == "2025-10-18 02:10:00" and failed[0]["ungraded"] == 37
    assert "429" in str(failed[0]["note"])


def test_rows_are_capped_and_the_result_says_so() -> None:
    def numbers(n: int) -> list[dict[str, object]]:
        return query_db(
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT {n}) "
            "SELECT i FROM n"
        )

    assert numbers(MAX_ROWS) == [{"i": i} for i in range(1, MAX_ROWS + 1)]
    capped = numbers(MAX_ROWS + 1)
    assert capped[:-1] == [{"i": i} for i in range(1, MAX_ROWS + 1)]
    assert set(capped[-1]) == {"truncated"} and f"first {MAX_ROWS} rows" in str(capped[-1])


def test_the_schema_is_readable_and_comments_may_lead() -> None:
    got = query_db(
        "-- the tables\n/* all of them */ SELECT name FROM sqlite_master "
        "WHERE type = 'table' ORDER BY name"
    )
    assert [row["name"] for row in got] == sorted(TABLES)


# --- query_db: refusals -------------------------------------------------------------------

NOT_A_SELECT = [
    "INSERT INTO cohorts VALUES ('x', 'x', '2025-01-01', '2025-01-02', 1)",
    "UPDATE refunds SET amount_cents = 0",
    "DELETE FROM refunds",
    "DROP TABLE refunds",
    "CREATE TABLE notes (body TEXT)",
    "REPLACE INTO cohorts VALUES ('x', 'x', '2025-01-01', '2025-01-02', 1)",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = WAL",
    "VACUUM INTO 'copy.db'",
    "BEGIN IMMEDIATE",
    "EXPLAIN SELECT 1",
    "-- looks harmless\nDELETE FROM refunds",
    "/* SELECT */ DROP TABLE refunds",
    "",
    "   ",
]


@pytest.mark.parametrize("sql", NOT_A_SELECT)
def test_anything_but_a_select_is_refused_and_the_file_is_untouched(sql: str) -> None:
    before = _snapshot(DB_PATH.parent)
    with pytest.raises(ToolError, match=r"single read-only SELECT \(or WITH \.\.\. SELECT\)"):
        query_db(sql)
    assert _snapshot(DB_PATH.parent) == before


WRITES_BEHIND_A_SELECT = [
    "WITH x AS (SELECT 1) DELETE FROM refunds",
    "WITH x AS (SELECT 1) INSERT INTO cohorts SELECT * FROM cohorts",
    "WITH x AS (SELECT 1) UPDATE refunds SET amount_cents = 0",
    "SELECT * FROM pragma_table_info('refunds')",
]


@pytest.mark.parametrize("sql", WRITES_BEHIND_A_SELECT)
def test_the_authorizer_refuses_what_starts_like_a_select(sql: str) -> None:
    before = _snapshot(DB_PATH.parent)
    with pytest.raises(ToolError, match="refused this SQL: it would do more than read"):
        query_db(sql)
    assert _snapshot(DB_PATH.parent) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1; DELETE FROM refunds",
        "SELECT 1; PRAGMA user_version = 7",
        "SELECT 1; ATTACH DATABASE ':memory:' AS other",
        "SELECT 1; SELECT 2",
    ],
)
def test_a_second_statement_is_refused_before_the_first_runs(sql: str) -> None:
    before = _snapshot(DB_PATH.parent)
    with pytest.raises(ToolError, match="send one statement, not several"):
        query_db(sql)
    assert _snapshot(DB_PATH.parent) == before


def test_the_connection_is_read_only_without_the_authorizer() -> None:
    with closing(tools._connect(DB_PATH, tools._Guard())) as conn:
        conn.set_authorizer(None)
        assert conn.execute("PRAGMA query_only").fetchone() == (1,)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM refunds")
        conn.execute("PRAGMA query_only = OFF")  # the mode=ro URI still holds
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM refunds")
    assert len(query_db("SELECT id FROM refunds")) == len(_source_rows("refunds"))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT random()",
        "SELECT hex(randomblob(4))",
        "SELECT CURRENT_TIMESTAMP",
        "SELECT current_date",
    ],
)
def test_functions_that_change_between_runs_are_refused(sql: str) -> None:
    with pytest.raises(ToolError, match="whose answer changes from run to run"):
        query_db(sql)


@pytest.mark.parametrize(
    "sql",
    ["SELECT date('now')", "SELECT julianday('NOW') - 1", "SELECT date()", "SELECT strftime('%Y')"],
)
def test_the_current_date_is_refused(sql: str) -> None:
    with pytest.raises(ToolError, match="current date or time"):
        query_db(sql)


def test_fixed_dates_are_allowed() -> None:
    got = query_db("SELECT julianday('2025-02-13') - julianday('2025-02-03') AS days")
    assert got == [{"days": 10.0}]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT x'00'", "BLOB"),
        ("SELECT 1e999", "not JSON"),
        ("SELECT 1 AS id, 2 AS id", "two columns named 'id'"),
        ("SELECT * FROM nope", "could not run this SQL: no such table: nope"),
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100000000) "
            "SELECT count(*) FROM n",
            "stopped this query after",
        ),
    ],
)
def test_results_that_cannot_be_json_or_never_end_are_errors(sql: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        query_db(sql)


def test_a_non_string_query_is_refused() -> None:
    with pytest.raises(ToolError, match="SQL as a string, not int"):
        query_db(42)  # type: ignore[arg-type]


def test_a_database_path_with_uri_characters_is_opened_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "we?ird #dir%41"
    folder.mkdir()
    shutil.copyfile(DB_PATH, folder / "course.db")
    before = _snapshot(tmp_path)
    got = tools._query(folder / "course.db", "SELECT count(*) AS n FROM students")
    assert got == [{"n": len(_source_rows("students"))}]
    assert _snapshot(tmp_path) == before  # no file created at a misparsed path


# --- read_docs ----------------------------------------------------------------------------


def test_the_course_documents_are_shipped() -> None:
    assert {p.name for p in DOCS_DIR.glob("*.md")} == DOCS


def test_read_docs_ranks_by_matched_words_and_breaks_ties_by_name(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# B\n\nRefund within days.\n", encoding="utf-8")
    (tmp_path / "a.md").write_text("# A\n\nNothing here.\n\nDays of REFUND.\n", encoding="utf-8")
    (tmp_path / "c.md").write_text("# C\n\nA refund, but no time.\n", encoding="utf-8")
    (tmp_path / "d.md").write_text("# D\n\nUnrelated text about the cohort.\n", encoding="utf-8")
    (tmp_path / "e.txt").write_text("refund days refund days\n", encoding="utf-8")
    got = tools._read_docs(tmp_path, "How many DAYS for the refund?", 10)
    assert got == [
        {"doc": "a.md", "score": 2, "excerpt": "Days of REFUND."},
        {"doc": "b.md", "score": 2, "excerpt": "Refund within days."},
        {"doc": "c.md", "score": 1, "excerpt": "A refund, but no time."},
    ]
    assert tools._read_docs(tmp_path, "days refund", 2) == got[:2]


def test_the_excerpt_is_the_first_matching_body_paragraph_capped(tmp_path: Path) -> None:
    long = "Retries " + "again and " * 100 + "done."
    (tmp_path / "x.md").write_text(
        f"# Retries\n\nFirst paragraph.\n\n{long}\n\nMore retries here.\n", encoding="utf-8"
    )
    (tmp_path / "y.md").write_text("# Retries in the title only\n\nBody text.\n", encoding="utf-8")
    x, y = tools._read_docs(tmp_path, "retries", 5)
    excerpt = str(x["excerpt"])
    assert excerpt.startswith("Retries again and") and excerpt.endswith("…")
    assert len(excerpt) <= tools.EXCERPT_CHARS < len(long)
    assert y == {"doc": "y.md", "score": 1, "excerpt": "Body text."}


def test_read_docs_on_the_course_documents() -> None:
    refund = read_docs("refund 14 days 50%")
    assert refund[0]["doc"] == "refund-policy.md" and len(refund) == 3
    incident = read_docs("grading job stopped 429", limit=1)
    assert [hit["doc"] for hit in incident] == ["incident-runbook.md"]
    assert read_docs("Refund") == read_docs("refund") == read_docs("the REFUND")
    assert read_docs("xylophone quokka") == []


def test_the_refund_document_agrees_with_the_rubric_case() -> None:
    rubric = tomllib.loads((ROOT / "rubric" / "bootcamp.toml").read_text(encoding="utf-8"))
    task = next(case["task"] for case in rubric["case"] if case["id"] == "refund-policy")
    assert "full refund within 14 days" in task and "50% within 30 days" in task
    policy = (DOCS_DIR / "refund-policy.md").read_text(encoding="utf-8")
    for rule in (
        "including day 14: a full refund",
        "including day 30: a refund of 50%",
        "From day 31: no refund",
    ):
        assert rule in policy


@pytest.mark.parametrize(
    ("query", "limit", "message"),
    [
        ("the of and", 3, "no searchable word"),
        ("", 3, "no searchable word"),
        (7, 3, "query as a string"),
        ("refund", 0, "limit from 1 to 10"),
        ("refund", 11, "limit from 1 to 10"),
        ("refund", True, "limit from 1 to 10"),
        ("refund", "3", "limit from 1 to 10"),
    ],
)
def test_read_docs_refuses_bad_arguments(query: object, limit: object, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        read_docs(query, limit)  # type: ignore[arg-type]


# --- search_repo --------------------------------------------------------------------------


def test_search_repo_finds_a_known_line_of_the_agent() -> None:
    lines = (LAB_DIR / "agent.py").read_text(encoding="utf-8").split("\n")
    number, line = next((n, t) for n, t in enumerate(lines, 1) if t.startswith("def run("))
    got = search_repo(line, limit=50)
    assert {"path": "lab/agent.py", "line": number, "text": line.strip()} in got


def test_search_repo_returns_lab_sources_in_path_and_line_order() -> None:
    expected = [
        {"path": f"lab/{path.name}", "line": n, "text": text.strip()}
        for path in sorted(LAB_DIR.glob("*.py"))
        for n, text in enumerate(path.read_text(encoding="utf-8").split("\n"), 1)
        if "import" in text
    ]
    assert len(expected) > 10
    assert search_repo("import", limit=10) == expected[:10]
    assert search_repo("import", limit=50) == expected[:50]


def test_search_repo_never_reads_outside_the_package(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    (lab / "sub").mkdir(parents=True)
    (lab / "a.py").write_text("x = 1\nneedle = 2\n", encoding="utf-8")
    (lab / "sub" / "b.py").write_text("needle\n", encoding="utf-8")
    (lab / "notes.txt").write_text("needle\n", encoding="utf-8")
    (tmp_path / "outside.py").write_text("needle\n", encoding="utf-8")
    (lab / "z.py").symlink_to(tmp_path / "outside.py")
    assert tools._search(lab, "needle", 10) == [
        {"path": "lab/a.py", "line": 2, "text": "needle = 2"}
    ]
    assert search_repo("def test_search_repo_never_reads_outside") == []  # this file: tests/


@pytest.mark.parametrize(
    ("text", "limit"), [("", 10), ("a\nb", 10), (None, 10), ("def", 0), ("def", 51)]
)
def test_search_repo_refuses_bad_arguments(text: object, limit: int) -> None:
    with pytest.raises(ToolError, match="search_repo needs"):
        search_repo(text, limit)  # type: ignore[arg-type]


# --- all of them ---------------------------------------------------------------------------


def test_the_registry_names_four_read_only_tools_and_one_write_tool() -> None:
    expected = {
        "query_db": query_db,
        "read_docs": read_docs,
        "search_repo": search_repo,
        "web_search": web_search,
    }
    assert expected == READ_ONLY_TOOLS
    assert {"save_note": save_note} == WRITE_TOOLS
    assert TOOLS.names == sorted([*expected, "save_note"])
    assert TOOLS.write_tool("save_note") is save_note
    assert all(TOOLS.write_tool(name) is None for name in expected)


CALLS: list[tuple[str, dict[str, object]]] = [
    ("query_db", {"sql": "SELECT * FROM students ORDER BY handle"}),
    ("query_db", {"sql": "SELECT lab, avg(score) AS mean FROM submissions GROUP BY lab"}),
    ("read_docs", {"query": "late submission penalty days", "limit": 5}),
    ("search_repo", {"text": "return", "limit": 20}),
    ("web_search", {"query": "retries with jitter after HTTP 429", "limit": 5}),
]

CHILD = """
import json, os, sys
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
writes, connects = [], []
def hook(event, args):
    if event == "open" and (
        (isinstance(args[1], str) and any(c in args[1] for c in "wax+"))
        or (isinstance(args[2], int) and args[2] & WRITE)
    ):
        writes.append(str(args[0]))
    elif event.startswith(("os.remove", "os.rename", "os.replace", "os.mkdir", "shutil.")):
        writes.append(event)
    elif event == "sqlite3.connect":
        connects.append(str(args[0]))
sys.addaudithook(hook)
from lab.tools import READ_ONLY_TOOLS, LAB_DIR
calls = json.loads(sys.argv[1])
results = [READ_ONLY_TOOLS[name](**args) for name, args in calls]
print(json.dumps({"lab": str(LAB_DIR), "results": results, "writes": writes,
                  "connects": connects}, allow_nan=False))
"""


def _run_child(python_path: Path, cwd: Path, seed: str) -> dict[str, object]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(python_path),
        "PYTHONHASHSEED": seed,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(CALLS)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_results_are_json_and_the_same_in_any_process_from_any_folder(tmp_path: Path) -> None:
    here = [READ_ONLY_TOOLS[name](**args) for name, args in CALLS]
    assert json.loads(json.dumps(here, allow_nan=False)) == here
    assert all(here)  # every call found something, so equality below is not vacuous
    before = _snapshot(LAB_DIR)
    for seed in ("1", "2"):
        child = _run_child(ROOT, tmp_path, seed)
        assert child["lab"] == str(LAB_DIR)
        assert child["results"] == here
        assert child["writes"] == []
        assert child["connects"] == [f"{DB_PATH.resolve().as_uri()}?mode=ro"] * 2
    assert _snapshot(LAB_DIR) == before
    assert list(tmp_path.iterdir()) == []


def test_a_copy_of_the_lab_reads_its_own_data(tmp_path: Path) -> None:
    copy = tmp_path.resolve() / "student"
    shutil.copytree(LAB_DIR, copy / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "lab" / "data" / "docs" / "zz-late.md").write_text(
        "# Copy only\n\nLate submission penalty days explained again.\n", encoding="utf-8"
    )
    child = _run_child(copy, tmp_path, "0")
    assert child["lab"] == str(copy / "lab")
    results = child["results"]
    assert isinstance(results, list)
    docs = [hit["doc"] for hit in results[2]]
    assert "zz-late.md" in docs
    assert child["connects"] == [f"{(copy / 'lab' / 'data' / 'course.db').as_uri()}?mode=ro"] * 2
