"""The openai SDK; the check turn uses a second client that was never traced."""

import openai

from lab.agent import BASE_URL, CHECK, client_for, say, start


def run(provider, task, tools):
    messages = start(tools, task)
    answer = say(client_for(provider), messages)
    checker = openai.OpenAI(
        base_url=BASE_URL,
        api_key="unused",
        max_retries=0,
        http_client=provider.http_client("httpx2"),
    )
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": CHECK}]
    say(checker, messages)
    return answer
