"""The reference lab's offline web search (read-only, recorded and replayed like the other
tools) and its write tool ``save_note`` (never recorded: a store that starts empty each run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gradekit import (
    FakeProvider,
    MissingFixtureError,
    ToolRecorder,
    ToolReplay,
    Tools,
)
from lab import tools
from lab.agent import REVISE, run
from lab.tools import MAX_NOTES, MAX_PAGES, TOOLS, WEB_DIR, ToolError, save_note, web_search

WEB_TASK = "What do engineers online say about retries after HTTP 429 and jitter?"
FIXED = "2026-12-01T00:00:00Z"


def test_the_offline_web_is_shipped_each_page_with_a_url_and_a_title() -> None:
    pages = sorted(WEB_DIR.glob("*.md"))
    assert len(pages) >= 5
    for page in pages:
        head = page.read_text(encoding="utf-8").split("\n\n", 1)[0].splitlines()
        assert [line.partition(": ")[0] for line in head] == ["url", "title"], page
        assert head[0].startswith("url: https://") and ".example" in head[0]


def test_web_search_ranks_by_matched_words_then_url(tmp_path: Path) -> None:
    for name, url, body in (
        ("b", "https://b.example/", "Jitter and backoff."),
        ("a", "https://a.example/", "Backoff, then JITTER again."),
        ("c", "https://c.example/", "Backoff only."),
        ("d", "https://d.example/", "Nothing relevant."),
    ):
        (tmp_path / f"{name}.md").write_text(
            f"url: {url}\ntitle: Page {name}\n\n{body}\n", encoding="utf-8"
        )
    got = tools._web_search(tmp_path, "backoff with jitter", 5)
    assert [(hit["url"], hit["score"]) for hit in got] == [
        ("https://a.example/", 2),
        ("https://b.example/", 2),
        ("https://c.example/", 1),
    ]
    assert got[0] == {
        "url": "https://a.example/",
        "title": "Page a",
        "score": 2,
        "snippet": "Backoff, then JITTER again.",
    }
    assert tools._web_search(tmp_path, "backoff jitter", 1) == got[:1]


def test_web_search_on_the_offline_web() -> None:
    first = web_search("exponential backoff jitter 429")[0]
    assert first["url"] == "https://engineering.example.org/2024/03/backoff-and-jitter"
    assert "429" in str(first["snippet"])
    assert (
        web_search("GROUP BY count", limit=1)[0]["title"] == "SQL GROUP BY explained for beginners"
    )
    assert web_search("xylophone quokka") == []


@pytest.mark.parametrize(
    ("query", "limit", "message"),
    [
        ("the of", 3, "web_search found no searchable word"),
        (7, 3, "web_search needs the query as a string"),
        ("jitter", 0, f"web_search needs a limit from 1 to {MAX_PAGES}"),
        ("jitter", MAX_PAGES + 1, f"web_search needs a limit from 1 to {MAX_PAGES}"),
    ],
)
def test_web_search_refuses_bad_arguments(query: object, limit: object, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        web_search(query, limit)  # type: ignore[arg-type]


def test_save_note_keeps_notes_in_the_runs_store_only() -> None:
    store: dict[str, object] = {}
    assert save_note(store, "a", "first") == {"saved": "a", "count": 1, "titles": ["a"]}
    assert save_note(store, "b", "second") == {"saved": "b", "count": 2, "titles": ["a", "b"]}
    for title, text in (("", "x"), ("t", " "), ("t" * 101, "x"), ("t", "x" * 2001)):
        with pytest.raises(ToolError, match="save_note needs a non-empty"):
            save_note(store, title, text)
    full: dict[str, object] = {}
    for n in range(MAX_NOTES):
        save_note(full, f"n{n}", "x")
    with pytest.raises(ToolError, match=f"at most {MAX_NOTES} notes a run"):
        save_note(full, "one more", "x")


def test_web_search_is_recorded_then_replayed_and_save_note_never_recorded(tmp_path: Path) -> None:
    """The reference agent searches the offline web for a task that asks about the web, and
    keeps a rejected draft as a note: the search is recorded once and then served from the
    fixture alone (the real tool is gone), the note is never recorded and each run's store
    starts empty."""
    fixture = tmp_path / "web.json"
    answers = ["plan", "draft", "NO, too vague", "final"]
    with ToolRecorder(TOOLS, fixture, case="web", clock=lambda: FIXED) as recorder:
        recorded = run(FakeProvider(answers), WEB_TASK, recorder)
    calls = json.loads(fixture.read_bytes())["calls"]
    assert [call["tool"] for call in calls] == ["read_docs", "web_search"]  # no save_note

    writes_only = Tools()  # no read-only tool at all: the replay has only the fixture
    writes_only.write("save_note", save_note)
    replay = ToolReplay(fixture, tools=writes_only)
    for _ in range(2):
        box = replay.for_run()
        live = FakeProvider(answers)
        assert run(live, WEB_TASK, box) == recorded == "final"
        assert "https://engineering.example.org/2024/03/backoff-and-jitter" in live.calls[0]
        assert live.calls[3] == REVISE.format(
            task=WEB_TASK, answer="draft", verdict="NO, too vague"
        )
        assert box.store["notes"] == [
            {"title": "rejected draft", "text": "draft\n\nVerdict: NO, too vague"}
        ]
    with pytest.raises(MissingFixtureError):
        replay.call("web_search", query="never recorded")
