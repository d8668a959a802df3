"""prompt_key: only leading and trailing whitespace is ignored."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from gradekit import prompt_key

WHITESPACE = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003", max_size=8)


def test_key_is_first_16_hex_of_sha256_of_the_stripped_utf8_prompt() -> None:
    prompt = "  Réponds en français \n"
    expected = hashlib.sha256("Réponds en français".encode()).hexdigest()[:16]
    assert prompt_key(prompt) == expected


def test_inner_whitespace_changes_the_key() -> None:
    assert prompt_key("a b") != prompt_key("a  b")


@given(core=st.text(), before=WHITESPACE, after=WHITESPACE)
def test_leading_and_trailing_whitespace_never_make_a_new_key(
    core: str, before: str, after: str
) -> None:
    assert prompt_key(before + core + after) == prompt_key(core)


@settings(max_examples=50)
@given(prompts=st.sets(st.text(min_size=1).map(str.strip).filter(bool), min_size=50, max_size=200))
def test_different_stripped_prompts_get_different_keys(prompts: set[str]) -> None:
    assert len({prompt_key(prompt) for prompt in prompts}) == len(prompts)


def test_keys_are_16_lowercase_hex_digits() -> None:
    key = prompt_key("anything")
    assert len(key) == 16
    assert set(key) <= set("0123456789abcdef")
