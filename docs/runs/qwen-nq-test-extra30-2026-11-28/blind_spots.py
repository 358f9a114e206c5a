"""The 0.5B model's blind spots on the 70 held-out questions: for each question with a
relevant passage that no reply credited, the model's answer to the run's first prompt
(its documents in that prompt's order; greedy, as the run), how the answer reader
attributed it, and the reference answers. Needs the Qwen GGUF and nq-heldout/ (the
collection of docs/probabilities.md) in the working directory; about 15 s per question.

    python docs/runs/qwen-nq-test-extra30-2026-11-28/blind_spots.py <qwen gguf> > blind-spots.jsonl
"""

import json
import sys
from pathlib import Path

from llama_cpp import Llama

from gold_panning_integrations.readers.answer import (
    ANSWER_SYSTEM_PROMPT,
    AnswerAttribution,
    clean_answer,
    render_answer_prompt,
)

RUNS = Path(__file__).resolve().parent.parent
SOURCES = (
    ("qwen-nq-test-2026-11-28", "qwen-test-auto-traces.jsonl"),
    ("qwen-nq-test-extra30-2026-11-28", "qwen-extra-traces.jsonl"),
)
corpus = {
    d["_id"]: d["text"] for d in map(json.loads, Path("nq-heldout/corpus.jsonl").read_text().splitlines())
}
queries = {q["_id"]: q for q in map(json.loads, Path("nq-heldout/queries.jsonl").read_text().splitlines())}
llm = Llama(sys.argv[1], n_ctx=4096, n_threads=2, verbose=False)
attribution = AnswerAttribution()
for run, traces in SOURCES:
    probs = (RUNS / run / "probabilities-gp-defaults.jsonl").read_text().splitlines()
    trace = (RUNS / run / traces).read_text().splitlines()
    for p, t in zip(map(json.loads, probs), map(json.loads, trace), strict=True):
        relevant = {i for i, d in enumerate(p["docs"]) if d in set(p["relevant"])}
        prompts = [pr for r in t["rounds"] for pr in r["prompts"]]
        if not relevant or any(relevant & set(pr["cited"]) for pr in prompts):
            continue
        first = prompts[0]
        docs = [corpus[p["docs"][i]] for i in first["docs"]]
        q = queries[p["qid"]]
        messages = [
            {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
            {"role": "user", "content": render_answer_prompt(q["text"], docs)},
        ]
        reply = llm.create_chat_completion(messages=messages, temperature=0.0, max_tokens=32)
        answer = clean_answer(reply["choices"][0]["message"]["content"])
        hits, how = attribution.attribute(answer, docs, question=q["text"])
        row = {
            "qid": p["qid"],
            "question": q["text"],
            "reference": q["metadata"]["answers"],
            "model": answer,
            "attributed": how,
            "credited_slots": list(hits),
            "relevant_slots": sorted(first["docs"].index(i) for i in relevant),
        }
        print(json.dumps(row), flush=True)
