"""Tool first: look the topic up in the glossary, then answer, then self-check."""

from gradekit import Traced, TracedTools

TOPICS = ["refund", "incident", "sql", "grader"]


def topic_of(task):
    lowered = task.lower()
    for topic in TOPICS:
        if topic in lowered:
            return topic
    return "cassette"


def look_up(tools, task):
    return TracedTools(tools).call("glossary", term=topic_of(task))["meaning"]


def answer_prompt(task, facts):
    return f"Background: {facts}\n\nTask: {task}\n\nAnswer briefly."


def check_prompt(task, answer):
    return f"Task: {task}\nAnswer: {answer}\n\nIs the answer right? Reply YES or NO."


def run(provider, task, tools):
    facts = look_up(tools, task)
    llm = Traced(provider)
    answer = llm.complete(answer_prompt(task, facts))
    verdict = llm.complete(check_prompt(task, answer))
    if verdict.strip().upper().startswith("NO"):
        answer = llm.complete(f"Fix this answer.\nTask: {task}\nAnswer: {answer}")
    return answer
