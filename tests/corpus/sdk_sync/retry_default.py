"""The openai SDK with a retry loop of its own, and a default answer when it runs out."""

import time

import openai

from lab import agent

DEFAULT = "No answer yet: the model API is not responding."


def say(client, messages, attempts=3):
    for attempt in range(attempts):
        try:
            return agent.say(client, messages)
        except (openai.APIConnectionError, openai.APITimeoutError):
            time.sleep(0.02 * 2**attempt)
    return DEFAULT


def run(provider, task, tools):
    client = agent.client_for(provider)
    messages = agent.start(tools, task)
    answer = say(client, messages)
    say(
        client,
        [
            *messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": agent.CHECK},
        ],
    )
    return answer
