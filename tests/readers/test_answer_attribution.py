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
    assert (
        AnswerAttribution(question_residual=False).attribute("Leo Ford's code is 48213", DOCS, question=q)[0]
        == ()
    )


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
        "Answer: 92148.",
        DOCS,
        question="What is Leo Ford's access code?",
        prompt_tokens=50,
        completion_tokens=4,
    )
    assert r.cited == (1,) and r.answer == "92148" and not r.failed
    assert r.prompt_tokens == 50 and r.completion_tokens == 4
    assert r.extra["attribution"] == "answer"
    empty = reading_from_answer("", DOCS)
    assert empty.cited == () and not empty.failed and empty.answer is None


def test_render_answer_prompt_keeps_order_one_line_each() -> None:
    text = render_answer_prompt("Q?", ["first  doc", "second\ndoc"])
    assert "Documents:\n- first doc\n- second doc\n" in text
    assert "Question: Q?" in text and "[1]" not in text


# ------------------------------------------------------- sentence answers: the key span
# Real pairs from Lost in the Middle's kv-retrieval-75_keys (MIT), first record.
KV = [
    ("a54e2eed-e625-4570-9f74-3624e77d6684", "d1ff29be-4e2a-4208-a182-0cea716be3d4"),
    ("9f4a92b9-5f69-4725-ba1e-403f08dea695", "703a7ce5-f17f-4e6d-b895-5836ba5ec71c"),
    ("52a9c80c-da51-4fc9-bf70-4a4901bc2ac3", "b2f8ea3d-4b1b-49e0-a141-b9823991ebeb"),
    ("f4eb1c53-af0a-4dc4-a3a5-c2d50851a178", "d733b0d2-6af3-44e1-8592-e5637fdb76fb"),
    ("0b018c55-7fd0-48cc-ae57-2f3a45dd94bf", "714ff1e8-5513-4bb8-b9b0-2e573ff3254f"),
]
KV_QUESTION = f'Extract the value corresponding to the key "{KV[1][0]}".'
KV_ANSWER = f"The value corresponding to the key {KV[1][0]} is {KV[1][1]}."


def test_kv_sentence_answer_credits_the_document_holding_the_value() -> None:
    docs = [f'Key: "{k}" Value: "{v}"' for k, v in KV]
    att = AnswerAttribution()
    # before: the residual kept "is" and matched nothing
    assert att.attribute(clean_answer(KV_ANSWER), docs, question=KV_QUESTION) == ((1,), "residual")


def test_kv_sentence_answer_credits_a_bare_value_document() -> None:
    docs = [v for _, v in KV]
    assert AnswerAttribution().attribute(KV_ANSWER, docs, question=KV_QUESTION) == ((1,), "residual")


# Real NQ passages (nq-open-oracle; Wikipedia, CC BY-SA): the gold for "where does the bob
# and tom show broadcast from" and passages sharing its generic words ("1983",
# "established", "radio", "show", "syndicated").
BOB_AND_TOM = (
    "The Bob & Tom Show is a syndicated US radio program established by Bob Kevoian and Tom Griswold at "
    "radio station WFBQ in Indianapolis, Indiana, March 7, 1983, and syndicated nationally since January 6, "
    "1995.  Originally syndicated by Premiere Networks, the show moved to Cumulus Media Networks (now "
    "Westwood One) at the beginning of 2014."
)
NQ_OTHERS = [
    (
        '"Rip It Up" was a 1983 single by Scottish post-punk band Orange Juice.  It was the second single to be '
        "released from their 1982 album of the same name. The song became the band's only UK top 40 success, "
        "reaching no. 8 in the chart."
    ),
    (
        "The Rock and Roll Hall of Fame Foundation was established on April 20, 1983, by Atlantic Records founder "
        "and chairman Ahmet Ertegun. In 1986, Cleveland was chosen as the Hall of Fame's permanent home."
    ),
    (
        "She traveled widely and spoke to many groups, often voicing personal opinions to the left of the "
        "president's. She authored a weekly newspaper column and hosted a radio show."
    ),
    (
        "The Hitchhiker's Guide to the Galaxy (sometimes referred to as HG2G, HHGTTG or H2G2) is a comedy science "
        "fiction series created by Douglas Adams. Originally a radio comedy broadcast on BBC Radio 4 in 1978, it "
        "was later adapted to other formats, including stage shows, novels, comic books, a 1981 TV series."
    ),
    (
        "Ochoa established the first El Pollo Loco restaurant in Guasave, Sinaloa, Mexico, in the mid-1970s, and "
        "then expanded his chain into the United States in 1980. Ochoa then sold his U.S. restaurants in 1983."
    ),
]
BOB_QUESTION = "where does the bob and tom show broadcast from"
BOB_ANSWER = (
    "The Bob & Tom Show (BTS) is a syndicated US radio show that began on March 7, 1983, and has since"
)


def test_sentence_answer_credits_the_passage_holding_its_key_span_not_generic_ones() -> None:
    att = AnswerAttribution()
    for gold in range(len(NQ_OTHERS) + 1):  # wherever the gold passage sits
        docs = list(NQ_OTHERS)
        docs.insert(gold, BOB_AND_TOM)
        assert att.attribute(BOB_ANSWER, docs, question=BOB_QUESTION) == ((gold,), "residual")


def test_without_the_gold_a_sentence_answer_credits_no_generic_passage() -> None:
    # the others share "1983", "radio", "established"... one word each: never enough
    assert AnswerAttribution().attribute(BOB_ANSWER, NQ_OTHERS, question=BOB_QUESTION) == ((), "none")


def test_a_span_common_to_many_shown_documents_credits_none() -> None:
    docs = [f"Report {i}: the annual harvest festival returns this autumn." for i in range(8)]
    docs.append("The mayor opened the bridge.")
    att = AnswerAttribution()
    # "harvest festival" is in 8 of 9 documents: generic here, it supports nothing
    assert att.attribute("It is the annual harvest festival", docs, question="What happens in autumn?") == (
        (),
        "none",
    )


def test_one_short_common_word_is_not_a_key_span() -> None:
    docs = ["The red car is fast.", "A blue boat floats.", "Green tea is hot."]
    # "car" is short and has no digit: too weak to credit a passage on its own
    assert AnswerAttribution().attribute("It was a car", docs, question="What vehicle is described?") == (
        (),
        "none",
    )
