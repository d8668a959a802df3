"""What a grading draws: unpredictable without the grader's key, repeatable with it.

The labels, hash seeds and probe recording used to be fixed ("provider-a", seeds 1 and
2, "what is 6 x 7?"), so a submission could behave one way at home and another when it
recognised the grader; then they were drawn afresh each grading, so a label-dependent
agent lost its stability points only when the draw happened to name the family it
branched on. Now a draw is a keyed function of the submission's content and a secret of
the grader's, and it always holds a label of every provider family.
"""

from __future__ import annotations

import re
import secrets

from grader.grading._draws import FAMILIES, SEED_POOL, draw, seed_pool

LABEL = re.compile(r"(openai|anthropic|ollama|llamacpp|openai-compatible):[a-z0-9.-]+")
# What a student might branch on: each family's adapter and its models' word.
BRANCHED_ON = (
    "openai",
    "anthropic",
    "ollama",
    "llamacpp",
    "openai-compatible",
    "gpt",
    "claude",
    "llama",
)


def test_every_draw_holds_one_label_of_each_family_and_a_seed_each() -> None:
    for _ in range(50):
        drawn = draw(secrets.token_bytes(32), "content")
        assert all(LABEL.fullmatch(label) for label in drawn.labels), drawn.labels
        adapters = [label.partition(":")[0] for label in drawn.labels]
        assert sorted(adapters) == sorted(adapter for adapter, _ in FAMILIES)
        assert len(set(drawn.seeds)) == len(drawn.seeds) == len(drawn.labels)
        assert all(0 <= seed < 1 << 32 for seed in drawn.seeds)  # what PYTHONHASHSEED takes
        assert len(drawn.probe) == 1 and drawn.unknown not in drawn.probe


def test_a_word_a_student_might_branch_on_is_in_some_label_and_missing_from_another() -> None:
    for _ in range(50):
        labels = draw(secrets.token_bytes(32), "content").labels
        for word in BRANCHED_ON:
            assert any(word in label for label in labels), (word, labels)
            assert any(word not in label for label in labels), (word, labels)


def test_the_same_key_and_content_draw_the_same_every_time() -> None:
    key = secrets.token_bytes(32)
    assert draw(key, "submission a") == draw(key, "submission a")
    assert draw(key, "submission a") != draw(key, "submission b")
    assert draw(key, "submission a") != draw(secrets.token_bytes(32), "submission a")


def test_without_the_key_nothing_repeats() -> None:
    draws = [draw(None, "the same content") for _ in range(50)]
    assert len({d.seeds for d in draws}) == 50
    assert len({next(iter(d.probe)) for d in draws}) > 40
    assert len({d.labels for d in draws}) > 40
    assert "provider-a" not in {label for d in draws for label in d.labels}


def test_an_instructors_label_is_the_primary_and_every_other_family_still_runs() -> None:
    for _ in range(20):
        drawn = draw(secrets.token_bytes(32), "content", "openai:gpt-4o-mini")
        assert drawn.labels[0] == "openai:gpt-4o-mini"
        assert sorted(label.partition(":")[0] for label in drawn.labels[1:]) == sorted(
            adapter for adapter, _ in FAMILIES if adapter != "openai"
        )
        custom = draw(secrets.token_bytes(32), "content", "provider-a")
        assert custom.labels[0] == "provider-a" and len(custom.labels) == len(FAMILIES) + 1


def test_seeds_come_from_the_keys_pool_each_grading_its_own_choice_and_order() -> None:
    """A batch starts one sandbox host per seed of the pool, once: every grading's seeds
    must be the pool's, and still differ from one submission to the next."""
    key = secrets.token_bytes(32)
    pool = seed_pool(key)
    assert len(set(pool)) == len(pool) == SEED_POOL
    assert all(0 <= seed < 1 << 32 for seed in pool)
    assert seed_pool(key) == pool and seed_pool(secrets.token_bytes(32)) != pool
    draws = [draw(key, f"submission {n}") for n in range(40)]
    assert all(set(d.seeds) <= set(pool) for d in draws)
    assert len({d.seeds for d in draws}) > 30  # choice and order keyed on the content
    assert len({d.seeds[0] for d in draws}) > 4  # the primary run's seed varies too
    custom = draw(key, "content", "provider-a")  # six labels: six seeds of the pool
    assert len(set(custom.seeds)) == len(custom.labels) and set(custom.seeds) <= set(pool)
