"""Goldens of est's cross-encoder reranking (docs/rerank.md, tests/test_rerank.c).

Writes under tests/data/rerank/:
  metrics_golden.txt  random (query, label, score) sets and their MRR@k / NDCG@k grouped by
                      query, computed here with numpy as written down independently of est:
                      per query, passages ordered by score descending (numpy's stable argsort
                      of -score: input order on ties); relevant = label >= 0.5; MRR@k = 1/rank
                      of the first relevant in the top k (0 if none); NDCG@k with linear gains
                      max(label, 0) / log2(rank + 1) over the top k, divided by the same of the
                      labels sorted (scikit-learn's ndcg_score formula without its tie
                      averaging); the means over queries that have a relevant passage.
  train.tsv, dev.tsv, test.tsv  a small pair set for the end-to-end test: each query names a
                      topic's words, its relevant passages hold that topic's words, the others
                      another topic's.

Run with the interop venv (numpy): .venv-interop/bin/python tests/reference/rerank_golden.py
"""
import os
import random

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "rerank")


def rank_metrics(query, labels, scores, k):
    # est reads labels and scores as float32
    query = np.asarray(query)
    labels = np.asarray(labels, np.float32).astype(np.float64)
    scores = np.asarray(scores, np.float32)
    mrr, ndcg, counted, skipped = [], [], 0, 0
    for q in np.unique(query):
        idx = np.nonzero(query == q)[0]
        lab, sc = labels[idx], scores[idx]
        if not np.any(lab >= 0.5):
            skipped += 1
            continue
        order = np.argsort(-sc.astype(np.float64), kind="stable")
        top = order[:k]
        rel = np.nonzero(lab[top] >= 0.5)[0]
        mrr.append(1.0 / (rel[0] + 1) if len(rel) else 0.0)
        gains = np.maximum(lab, 0.0)
        disc = 1.0 / np.log2(np.arange(len(top)) + 2.0)
        dcg = float(np.sum(gains[top] * disc))
        ideal = float(np.sum(np.sort(gains)[::-1][:k] * disc))
        ndcg.append(dcg / ideal if ideal > 0 else 0.0)
        counted += 1
    return (float(np.mean(mrr)) if mrr else 0.0, float(np.mean(ndcg)) if ndcg else 0.0, counted, skipped)


def write_metrics(rng):
    lines = []
    for case in range(12):
        n = rng.randint(1, 60)
        nq = rng.randint(1, 8)
        k = [10, 10, 10, 1, 3, 5][case % 6]
        query = [rng.randrange(nq) for _ in range(n)]
        if case % 3 == 0:
            labels = [float(rng.random() < 0.3) for _ in range(n)]
        elif case % 3 == 1:
            labels = [float(rng.randint(0, 3)) for _ in range(n)]  # TREC-style grades
        else:
            labels = [round(rng.random(), 3) for _ in range(n)]  # scores in [0, 1]
        # ties: scores drawn from few values in some cases
        if case % 4 == 0:
            scores = [float(rng.randint(-2, 2)) for _ in range(n)]
        else:
            scores = [float(np.float32(rng.gauss(0, 2))) for _ in range(n)]
        mrr, ndcg, counted, skipped = rank_metrics(query, labels, scores, k)
        lines.append("case %d %d" % (n, k))
        lines.append("query " + " ".join(str(q) for q in query))
        lines.append("labels " + " ".join(repr(x) for x in labels))
        lines.append("scores " + " ".join(repr(x) for x in scores))
        lines.append("mrr %r" % mrr)
        lines.append("ndcg %r" % ndcg)
        lines.append("counted %d" % counted)
        lines.append("skipped %d" % skipped)
    with open(os.path.join(OUT, "metrics_golden.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


TOPICS = {
    "sports": "team league game score player coach season match win",
    "politics": "vote election senate law party president minister policy",
    "tech": "code robot cloud software computer data network chip",
    "food": "bread cheese soup cook kitchen recipe dinner fruit",
}


def write_pairs(rng):
    topics = sorted(TOPICS)
    words = {t: TOPICS[t].split() for t in topics}
    for split, nq in (("train", 24), ("dev", 8), ("test", 4)):
        rows = ["query\tpassage\tlabel"]
        for _ in range(nq):
            t = rng.choice(topics)
            query = "about " + " ".join(rng.sample(words[t], 2))
            pairs = []
            for _ in range(2):
                pairs.append((" ".join(rng.sample(words[t], 4)) + " the", 1))
            for _ in range(3):
                o = rng.choice([x for x in topics if x != t])
                pairs.append((" ".join(rng.sample(words[o], 4)) + " the", 0))
            rng.shuffle(pairs)
            rows += ["%s\t%s\t%d" % (query, p, l) for p, l in pairs]
        with open(os.path.join(OUT, split + ".tsv"), "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_metrics(random.Random(49))
    write_pairs(random.Random(4949))
