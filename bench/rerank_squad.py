"""Question -> paragraph reranking pairs from SQuAD v1.1 (bench/rerank_squad.sh, docs/rerank.md §7),
and BM25's MRR@10 / NDCG@10 on the held-out pairs. Standard library only.

  python3 bench/rerank_squad.py build SQUAD_JSON OUT_DIR   writes OUT_DIR/{train,dev}.tsv
  python3 bench/rerank_squad.py bm25 SQUAD_JSON OUT_DIR    prints BM25's metrics on dev.tsv

Articles are split, never questions: the first 8 articles train, the last 3 are held out.
  train.tsv  TRAIN_QUERIES questions (env, default 256) drawn from the training articles, each with
             its own paragraph (label 1) and NEGATIVES (env, default 3) other paragraphs of the
             same article (label 0);
  dev.tsv    DEV_QUERIES held-out questions (default 60), each with its paragraph and 9 others
             of its article: 10 candidates, so MRR@10 sees them all (random order: ~0.29).
Same article negatives are the hard ones: same topic and names, only the paragraph that
answers differs.
"""
import json
import math
import os
import random
import re
import sys

HELD_OUT = 3


def articles(path):
    return json.load(open(path, encoding="utf-8"))["data"]


def clean(text):
    return " ".join(text.split())  # no TAB or newline inside a field


def questions(arts):
    out = []
    for a in arts:
        paras = [clean(p["context"]) for p in a["paragraphs"]]
        for i, p in enumerate(a["paragraphs"]):
            for qa in p["qas"]:
                out.append((clean(qa["question"]), i, paras))
    return out


def build(path, out_dir):
    arts = articles(path)
    rng = random.Random(49)
    train_q = questions(arts[:-HELD_OUT])
    dev_q = questions(arts[-HELD_OUT:])
    rng.shuffle(train_q)
    rng.shuffle(dev_q)
    os.makedirs(out_dir, exist_ok=True)
    neg = int(os.environ.get("NEGATIVES", "3"))
    rows = ["query\tpassage\tlabel"]
    for q, i, paras in train_q[: int(os.environ.get("TRAIN_QUERIES", "256"))]:
        others = rng.sample([j for j in range(len(paras)) if j != i], neg)
        pairs = [(i, 1)] + [(j, 0) for j in others]
        rng.shuffle(pairs)
        rows += ["%s\t%s\t%d" % (q, paras[j], l) for j, l in pairs]
    open(os.path.join(out_dir, "train.tsv"), "w", encoding="utf-8").write("\n".join(rows) + "\n")
    rows = ["query\tpassage\tlabel"]
    for q, i, paras in dev_q[: int(os.environ.get("DEV_QUERIES", "60"))]:
        others = rng.sample([j for j in range(len(paras)) if j != i], 9)
        pairs = [(i, 1)] + [(j, 0) for j in others]
        rng.shuffle(pairs)
        rows += ["%s\t%s\t%d" % (q, paras[j], l) for j, l in pairs]
    open(os.path.join(out_dir, "dev.tsv"), "w", encoding="utf-8").write("\n".join(rows) + "\n")


def tokens(text):
    return re.findall(r"\w+", text.lower())


def bm25(path, out_dir, k1=1.2, b=0.75):
    """Okapi BM25 (Lucene's idf, log(1 + (N - n + 0.5) / (n + 0.5))) with the held-out articles'
    paragraphs as the collection; each dev pair scored, then est's metrics (est/rerank.h)."""
    docs = [tokens(p["context"]) for a in articles(path)[-HELD_OUT:] for p in a["paragraphs"]]
    n_docs, avg = len(docs), sum(map(len, docs)) / len(docs)
    df = {}
    for d in docs:
        for t in set(d):
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    groups = {}
    lines = open(os.path.join(out_dir, "dev.tsv"), encoding="utf-8").read().splitlines()[1:]
    for line in lines:
        q, p, label = line.split("\t")
        d = tokens(p)
        tf = {}
        for t in d:
            tf[t] = tf.get(t, 0) + 1
        s = sum(idf.get(t, 0.0) * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
                for t in tokens(q) if t in tf)
        groups.setdefault(q, []).append((s, float(label)))
    mrr, ndcg = [], []
    for pairs in groups.values():  # est's order: score descending, input order on ties
        order = sorted(range(len(pairs)), key=lambda i: (-pairs[i][0], i))
        ranked = [pairs[i][1] for i in order][:10]
        if not any(l >= 0.5 for _, l in pairs):
            continue
        first = next((r for r, l in enumerate(ranked) if l >= 0.5), None)
        mrr.append(1.0 / (first + 1) if first is not None else 0.0)
        dcg = sum(max(l, 0) / math.log2(r + 2) for r, l in enumerate(ranked))
        ideal = sum(max(l, 0) / math.log2(r + 2)
                    for r, l in enumerate(sorted((l for _, l in pairs), reverse=True)[:10]))
        ndcg.append(dcg / ideal if ideal > 0 else 0.0)
    print("bm25_mrr@10 = %.4f" % (sum(mrr) / len(mrr)))
    print("bm25_ndcg@10 = %.4f" % (sum(ndcg) / len(ndcg)))
    print("bm25_num_queries = %d" % len(mrr))


if __name__ == "__main__":
    {"build": build, "bm25": bm25}[sys.argv[1]](sys.argv[2], sys.argv[3])
