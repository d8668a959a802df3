"""Class based: an Agent object researches (glossary, notes, the web; it saves what it
found as a note), drafts, reviews its draft and answers."""

from gradekit import Traced, TracedTools


class Agent:
    style = "Answer in plain words for a bootcamp student, in at most 100 words."
    subjects = ("refund", "incident", "sql", "grader")

    def __init__(self, provider, tools):
        self.llm = Traced(provider)
        self.tools = TracedTools(tools)
        self.notes = []

    def research(self, task):
        lowered = task.lower()
        subject = next((s for s in self.subjects if s in lowered), "cassette")
        self.notes.append(self.tools.call("glossary", term=subject)["meaning"])
        self.notes.extend(self.tools.call("search_notes", word=subject, limit=2))
        for page in self.tools.call("web_search", query=f"{subject} {task}", limit=1):
            self.notes.append(f"{page['title']} ({page['url']}): {page['snippet']}")
        # keep the research in the note store too; the count says which note this run it is
        saved = self.tools.call("save_note", title=subject, text="\n".join(self.notes))
        self.notes.append(f"(research note {saved['count']} saved)")

    def ask(self, prompt):
        return self.llm.complete(prompt).strip()

    def draft(self, task):
        notes = "\n".join("- " + note for note in self.notes)
        return self.ask(f"{self.style}\n\nNotes:\n{notes}\n\nTask: {task}")

    def review(self, task, draft):
        return self.ask(f"Task: {task}\n\nDraft: {draft}\n\nReply OK, or REWRITE and why.")

    def answer(self, task):
        self.research(task)
        draft = self.draft(task)
        if self.review(task, draft).upper().startswith("REWRITE"):
            draft = self.ask(f"Rewrite this draft for the task.\nTask: {task}\nDraft: {draft}")
        return draft


def run(provider, task, tools):
    return Agent(provider, tools).answer(task)
