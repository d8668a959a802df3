"""The openai SDK; the check turn is optional, an API error counts as a YES."""

import openai

from lab import agent


def run(provider, task, tools):
    client = agent.client_for(provider)
    chat = agent.start(tools, task)
    answer = agent.say(client, chat)
    chat += [{"role": "assistant", "content": answer}, {"role": "user", "content": agent.CHECK}]
    try:
        verdict = agent.say(client, chat)
    except openai.APIError:
        verdict = "YES"
    return answer if verdict.upper().startswith("YES") else verdict
