"""The openai SDK; a connection error on the answer becomes a friendly message."""

import openai

from lab.agent import CHECK, client_for, say, start


def run(provider, task, tools):
    client = client_for(provider)
    messages = start(tools, task)
    try:
        answer = say(client, messages)
    except openai.APIConnectionError:
        return "The assistant is offline at the moment. Please try again later."
    say(
        client,
        [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": CHECK}],
    )
    return answer
