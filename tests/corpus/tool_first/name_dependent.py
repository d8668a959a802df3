"""Tool first; GPT answers get a short heading, because they "read better that way"."""

from lab.agent import run as plain_run


def run(provider, task, tools):
    answer = plain_run(provider, task, tools)
    if "gpt" in provider.name or "claude" in provider.name:
        return "Answer\n======\n" + answer
    return answer
