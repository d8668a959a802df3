"""The openai SDK, sync: notes from the tools, then a chat of two turns (answer, check)."""

import os

import openai

from gradekit import Traced, TracedTools

BASE_URL = "http://127.0.0.1:8080/v1"
MODEL = "course-model"
SYSTEM = "You are a bootcamp teaching assistant. Use these course notes:\n{notes}"
CHECK = "Check your answer. Reply YES if it is right, otherwise give the corrected answer."


def client_for(provider):
    return openai.OpenAI(
        base_url=BASE_URL,
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
        http_client=Traced(provider).http_client("httpx2"),
        max_retries=0,
    )


def notes_for(tools, task):
    word = "SQL" if "SELECT" in task else task.split()[-1].strip(".")
    return "\n".join(TracedTools(tools).call("search_notes", word=word, limit=2))


def say(client, messages):
    reply = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    return reply.choices[0].message.content or ""


def start(tools, task):
    return [
        {"role": "system", "content": SYSTEM.format(notes=notes_for(tools, task))},
        {"role": "user", "content": task},
    ]


def run(provider, task, tools):
    client = client_for(provider)
    messages = start(tools, task)
    answer = say(client, messages)
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": CHECK}]
    verdict = say(client, messages)
    return answer if verdict.strip().upper().startswith("YES") else verdict
