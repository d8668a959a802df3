"""What a grading draws afresh: nothing a submission can special-case is a constant.

The labels, hash seeds and probe recording used to be fixed ("provider-a", seeds 1 and
2, "what is 6 x 7?"), so a submission could behave one way at home and another when it
recognised the grader. The variants ``special_cases_labels`` and ``signs_with_label`` in
``tests/submissions.py`` show the effect end to end; these pin the draw itself.
"""

from __future__ import annotations

import re

from grader._grade import draw

LABEL = re.compile(r"(openai|anthropic|ollama|llamacpp|openai-compatible):[a-z0-9.-]+")


def test_each_grading_draws_two_different_labels_seeds_and_a_fresh_probe() -> None:
    draws = [draw() for _ in range(50)]
    for drawn in draws:
        (adapter, model), (other_adapter, other_model) = (
            label.split(":") for label in drawn.labels)
        assert adapter != other_adapter and model != other_model, drawn.labels
        assert all(LABEL.fullmatch(label) for label in drawn.labels), drawn.labels
        assert drawn.seeds[0] != drawn.seeds[1]
        assert all(0 <= seed < 1 << 32 for seed in drawn.seeds)  # what PYTHONHASHSEED takes
        assert len(drawn.probe) == 1 and drawn.unknown not in drawn.probe
    # Fresh every time: no seed, probe or label pair that a submission could wait for.
    assert len({d.seeds for d in draws}) == 50
    assert len({next(iter(d.probe)) for d in draws}) > 40
    assert len({d.labels for d in draws}) > 40
    assert "provider-a" not in {label for d in draws for label in d.labels}


def test_an_instructors_label_is_the_primary_and_the_secondary_still_differs() -> None:
    for _ in range(20):
        drawn = draw("openai:gpt-4o-mini")
        assert drawn.labels[0] == "openai:gpt-4o-mini"
        assert drawn.labels[1] != "openai:gpt-4o-mini"
