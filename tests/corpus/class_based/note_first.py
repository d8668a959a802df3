"""Class based; it notes the task first, best effort (a note is a nicety: a store that is full,
or a note refused, must not stop the answer), then researches and answers as the honest
agent does. Not a mistake: a write tool's call is never a fixture's, so no miss can hide in
what the ``except`` swallows."""

import contextlib

from lab.agent import Agent


class NoteFirst(Agent):
    def research(self, task):
        with contextlib.suppress(Exception):
            self.tools.call("save_note", title="task", text=task)
        super().research(task)


def run(provider, task, tools):
    return NoteFirst(provider, tools).answer(task)
