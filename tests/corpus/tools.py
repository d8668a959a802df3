"""Our lab's tools: a small glossary and the course notes, and the hand-out's offline web
search and note store as it shipped them (lab/course_tools.py)."""

from pathlib import Path

from lab.course_tools import save_note, web_search

from gradekit import Tools

TOOLS = Tools()
TOOLS.read_only("web_search", web_search)
TOOLS.write("save_note", save_note)
NOTES = Path(__file__).with_name("notes.txt")

GLOSSARY = {
    "refund": "A full refund within 14 days of purchase, 50% within 30 days, nothing after.",
    "incident": "An incident note says what broke, when, how many people it hit, and the fix.",
    "sql": "GROUP BY folds the rows that share a value; COUNT(*) counts the rows of each group.",
    "grader": "The grader replays recorded answers and never calls a live model.",
    "cassette": "A cassette maps the key of each prompt to the answer recorded for it.",
}


@TOOLS.read_only("glossary")
def glossary(term):
    """What the course glossary says about a term."""
    return {"term": term, "meaning": GLOSSARY.get(term.lower(), "not in the glossary")}


@TOOLS.read_only("search_notes")
def search_notes(word, limit=2):
    """Lines of the course notes that mention a word, at most ``limit``."""
    lines = NOTES.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if word.lower() in line.lower()][:limit]
