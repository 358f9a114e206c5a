"""Issue 42 probe: does one call of the 0.5B model say more about "nothing relevant here"
than BM25's score level does? Calibration split only; no test question.

Per question (30 emptied and 30 others of the calibration split, drawn with seed 42):
one answer-mode prompt with the BM25 top 10 in BM25 order (the package's prompt), greedy,
with the tokens' log-probabilities; and for each of the top 3 passages a one-passage
prompt "Does the passage answer the question? Answer yes or no." whose first token gives
P(yes) / (P(yes) + P(no)). One JSON line per question, resumable.

    python docs/runs/qwen-nq-probe-2026-11-28/probe.py QWEN.gguf nq-heldout probe-calibration.jsonl
"""

import json
import math
import random
import sys
import time
from pathlib import Path

from llama_cpp import Llama

from gold_panning_integrations.ir.collection import load_beir
from gold_panning_integrations.readers.answer import (
    ANSWER_SYSTEM_PROMPT,
    reading_from_answer,
    render_answer_prompt,
)

model, nq, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
col = load_beir(nq, split="calibration", run=nq / "run-calibration-bm25-quarter-none.trec", depth=10)
emptied = set((nq / "quarter-none-calibration.txt").read_text().split())
assert col.candidates is not None and col.candidate_scores is not None
qids = [q for q in col.queries if q in col.candidates]
rng = random.Random(42)
e, ne = [q for q in qids if q in emptied], [q for q in qids if q not in emptied]
rng.shuffle(e)
rng.shuffle(ne)
order = [x for pair in zip(e[:30], ne[:30]) for x in pair]
done = {json.loads(line)["qid"] for line in out.read_text().splitlines()} if out.exists() else set()
llm = Llama(model_path=model, n_ctx=4096, n_threads=2, verbose=False, logits_all=True)


def chat(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, list]:
    r = llm.create_chat_completion(
        messages=messages, max_tokens=max_tokens, temperature=0.0, logprobs=True, top_logprobs=5, seed=0
    )
    choice = r["choices"][0]
    tokens = choice["logprobs"]["content"] if choice.get("logprobs") else []
    return choice["message"]["content"], [
        (t["token"], t["logprob"], {c["token"]: c["logprob"] for c in t["top_logprobs"]}) for t in tokens
    ]


for q in order:
    if q in done:
        continue
    t0 = time.time()
    docs = [col.documents[d] for d in col.candidates[q]]
    question = col.queries[q]
    user = render_answer_prompt(question, docs)
    text, toks = chat(
        [{"role": "system", "content": ANSWER_SYSTEM_PROMPT}, {"role": "user", "content": user}], 24
    )
    reading = reading_from_answer(text, docs, question=question)
    yes = []
    for d in docs[:3]:
        msg = f"Passage: {d[:1500]}\n\nQuestion: {question}\nDoes the passage answer the question? Answer yes or no."
        _, first = chat([{"role": "user", "content": msg}], 1)
        cands = first[0][2] if first else {}
        py = sum(math.exp(v) for k, v in cands.items() if k.strip().lower().startswith("y"))
        pn = sum(math.exp(v) for k, v in cands.items() if k.strip().lower().startswith("n"))
        yes.append(py / (py + pn) if py + pn > 0 else None)
    rec = {
        "qid": q,
        "emptied": q in emptied,
        "scores": list(col.candidate_scores[q]),
        "answer": text,
        "tokens": [(t, lp) for t, lp, _ in toks],
        "first": toks[0][2] if toks else {},
        "cited": list(reading.cited),
        "yes": yes,
        "relevant": [i for i, d in enumerate(col.candidates[q]) if col.qrels.get(q, {}).get(d, 0) > 0],
        "seconds": round(time.time() - t0, 1),
    }
    with out.open("a") as f:
        f.write(json.dumps(rec, default=float) + "\n")
