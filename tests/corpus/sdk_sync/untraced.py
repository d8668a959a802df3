"""The openai SDK on the provider's own HTTP client, without Traced; the tools are traced."""

import openai

from lab.agent import BASE_URL, MODEL, notes_for


def run(provider, task, tools):
    client = openai.OpenAI(
        base_url=BASE_URL,
        api_key="unused",
        max_retries=0,
        http_client=provider.http_client("httpx2"),
    )
    system = "You are a bootcamp teaching assistant. Course notes:\n" + notes_for(tools, task)
    reply = client.chat.completions.create(
        model=MODEL,
        temperature=0,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": task}],
    )
    return reply.choices[0].message.content
