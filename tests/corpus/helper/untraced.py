"""One helper, called with the provider itself: nothing is traced but the notes lookup."""

from lab.agent import OUTLINE, SHORTEN, WRITE, ask, notes


def run(provider, task, tools):
    outline = ask(provider, OUTLINE.format(task=task, notes=notes(tools, task)))
    text = ask(provider, WRITE.format(outline=outline))
    return ask(provider, SHORTEN.format(text=text))
