"""Answer attribution: normalisation, matching, generic answers, readings."""

from __future__ import annotations

from gold_panning_integrations.readers.answer import (
    AnswerAttribution,
    clean_answer,
    normalize_tokens,
    reading_from_answer,
    render_answer_prompt,
    token_matcher,
)

DOCS = [
    "Nina Keller's access code is 68447.",
    "Leo Ford's access code is 92148.",
    "Elias Pike's access code is 148213.",
    "Mila Sato's access code is 48213.",
]


def test_normalize_tokens() -> None:
    assert normalize_tokens("The Röntgen-ray, in 1901!") == ["rontgen", "ray", "in", "1901"]
    assert normalize_tokens("  An   APPLE a day ") == ["apple", "day"]


def test_token_boundaries() -> None:
    assert token_matcher("48213", DOCS[3])
    assert not token_matcher("48213", DOCS[2])  # 148213 is another token
    assert token_matcher("the Eiffel Tower", "Eiffel tower is tall.")
    assert not token_matcher("tower eiffel", "Eiffel tower is tall.")  # order matters


def test_generic_answers_support_nothing() -> None:
    att = AnswerAttribution()
    for a in ["", "I don't know.", "unknown", "None", "N/A"]:
        assert att.attribute(a, ["I don't know unknown none n/a"])[0] == ()
        assert not token_matcher(a, "I don't know unknown none")


def test_attribution_whole_answer_and_residual() -> None:
    att = AnswerAttribution()
    assert att.attribute("48213", DOCS) == ((3,), "answer")
    # a sentence answer about another person: attributed through its residual value
    q = "What is Leo Ford's access code?"
    assert att.attribute("Leo Ford's access code is 48213", DOCS, question=q) == ((3,), "residual")
    assert att.attribute("Leo Ford's access code is 48213", DOCS) == ((), "none")
    # residual made only of question words/filler attributes nothing
    assert att.attribute("Leo Ford's access code", DOCS, question=q) == ((), "echo")
    assert att.attribute("Leo Ford's access code", DOCS) == ((1,), "answer")  # no question: no echo test
    assert AnswerAttribution(question_residual=False).attribute("Leo Ford's code is 48213", DOCS, question=q)[0] == ()


def test_several_supporting_documents() -> None:
    docs = ["Paris is in France.", "Lyon is in France.", "Rome is in Italy."]
    assert AnswerAttribution().attribute("France", docs) == ((0, 1), "answer")


def test_matcher_is_replaceable() -> None:
    calls = []

    def substring(answer: str, document: str) -> bool:
        calls.append((answer, document))
        return answer in document

    att = AnswerAttribution(matcher=substring)
    assert att.attribute("48213", DOCS) == ((2, 3), "answer")  # plain substring: 148213 matches too
    assert len(calls) == 4


def test_clean_answer() -> None:
    assert clean_answer("Answer: Paris.\nBecause...") == "Paris"
    assert clean_answer('\n  "48213"  ') == "48213"
    assert clean_answer(None) == ""


def test_reading_from_answer() -> None:
    r = reading_from_answer(
        "Answer: 92148.", DOCS, question="What is Leo Ford's access code?", prompt_tokens=50, completion_tokens=4
    )
    assert r.cited == (1,) and r.answer == "92148" and not r.failed
    assert r.prompt_tokens == 50 and r.completion_tokens == 4
    assert r.extra["attribution"] == "answer"
    empty = reading_from_answer("", DOCS)
    assert empty.cited == () and not empty.failed and empty.answer is None


def test_render_answer_prompt_keeps_order_without_labels() -> None:
    text = render_answer_prompt("Q?", ["first  doc", "second\ndoc"])
    assert "- first doc\n- second doc" in text
    assert "Question: Q?" in text and "[1]" not in text
