"""Sentence embeddings in int8 next to ONNX Runtime's (issue 36 item 3, `est embed
--precision=int8`): STS-B dev's Spearman correlation (x100) of the cosine similarity with the
gold scores, for a sentence-transformers model in fp32 and int8, in est and ONNX Runtime, and
how close each runtime's int8 embeddings are to its fp32 ones.

  ort_int8_sts.py --hf_dir DIR --sts dev.tsv --out OUT [--est P=S1.tsv,S2.tsv ...]

DIR: a sentence-transformers BERT directory with mean pooling (all-MiniLM-L6-v2). ONNX
Runtime runs BertModel + mean pooling over the attention mask + L2 normalisation (what
sentence-transformers' encode(normalize_embeddings=True) computes), exported and quantized by
ort_int8_accuracy.py's fp32_and_int8_sessions (optimize_model, then quantize_dynamic with
per-channel QInt8). Tokens: BertTokenizerFast on DIR's tokenizer, cut at 256 tokens (the
model's sentence_bert_config.json), padded per batch. --est P=S1,S2: est embed's TSV outputs
(--output_format=tsv) for the dev set's first and second sentences at precision P; the first P
given is the one the others are compared with. Prints one JSON line.
"""
import argparse
import csv
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_int8_accuracy import fp32_and_int8_sessions  # noqa: E402

SEQ = 256


def ranks(x):
    """0-based ranks, ties given their mean rank (as scipy.stats.rankdata - 1)."""
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2
        i = j + 1
    return r


def spearman100(a, b):
    return float(100 * np.corrcoef(ranks(a), ranks(b))[0, 1])


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def read_est(path, rows):
    x = np.loadtxt(path, delimiter="\t", ndmin=2)
    if len(x) != rows:
        sys.exit("%s: %d embeddings, the dev set has %d pairs" % (path, len(x), rows))
    return unit(x)


def embed(sess, tok, texts, batch=64):
    out = []
    for i in range(0, len(texts), batch):
        enc = tok(texts[i:i + batch], max_length=SEQ, truncation=True, padding="longest", return_tensors="np")
        feeds = {"input_ids": enc["input_ids"].astype(np.int64), "input_mask": enc["attention_mask"].astype(np.int64),
                 "segment_ids": enc["token_type_ids"].astype(np.int64)}
        out.append(sess.run(None, feeds)[0])
    return unit(np.concatenate(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf_dir", required=True)
    ap.add_argument("--sts", required=True, help="STS-B dev.tsv (GLUE's columns; a header line is skipped)")
    ap.add_argument("--out", required=True, help="directory for the two ONNX graphs")
    ap.add_argument("--est", action="append", default=[], help="P=S1.tsv,S2.tsv")
    a = ap.parse_args()

    import onnxruntime as ort
    import torch
    from transformers import BertModel, BertTokenizerFast

    rows = [r for r in csv.reader(open(a.sts, encoding="utf-8"), delimiter="\t", quotechar=None) if r]
    if rows and rows[0][-1] == "score":
        rows = rows[1:]
    s1, s2, gold = [r[7] for r in rows], [r[8] for r in rows], np.array([float(r[9]) for r in rows])
    model = BertModel.from_pretrained(a.hf_dir, attn_implementation="eager").eval()
    tok = BertTokenizerFast.from_pretrained(a.hf_dir)

    class MeanPooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask, segs):
            tokens = self.m(input_ids=ids, attention_mask=mask, token_type_ids=segs).last_hidden_state
            m = mask.unsqueeze(-1).to(tokens.dtype)
            return (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)

    enc = tok(s1[:2], max_length=SEQ, truncation=True, padding="max_length", return_tensors="np")
    sample = {"input_ids": enc["input_ids"].astype(np.int64), "input_mask": enc["attention_mask"].astype(np.int64),
              "segment_ids": enc["token_type_ids"].astype(np.int64)}
    sess = fp32_and_int8_sessions(MeanPooled().eval(), model.config, sample, {"embedding": {0: "batch"}}, a.out)
    emb = {"ort_" + p: (embed(s, tok, s1), embed(s, tok, s2)) for p, s in sess.items()}
    for spec in a.est:
        p, files = spec.split("=", 1)
        f1, f2 = files.split(",")
        emb["est_" + p] = (read_est(f1, len(rows)), read_est(f2, len(rows)))

    res = {"onnxruntime": ort.__version__, "pairs": len(rows)}
    for name, (e1, e2) in emb.items():
        res[name + "_spearman"] = round(spearman100((e1 * e2).sum(1), gold), 2)
    base = {"ort": "ort_fp32", "est": "est_" + a.est[0].split("=")[0] if a.est else None}
    for name, (e1, e2) in emb.items():
        ref = base[name.split("_")[0]]
        if ref is None or name == ref:
            continue
        r1, r2 = emb[ref]
        cos = np.concatenate([(e1 * r1).sum(1), (e2 * r2).sum(1)])
        res[name + "_cos_to_" + ref.split("_")[1]] = {"min": round(float(cos.min()), 4),
                                                      "mean": round(float(cos.mean()), 5)}
    if "est_fp32" in emb:  # the same model in two runtimes
        r1, r2 = emb["est_fp32"]
        e1, e2 = emb["ort_fp32"]
        res["est_fp32_cos_to_ort_fp32_min"] = round(float(np.concatenate([(e1 * r1).sum(1), (e2 * r2).sum(1)]).min()),
                                                    6)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
