"""A random cross-encoder (BertForSequenceClassification with num_labels 1, as
sentence-transformers' CrossEncoder saves one) and its scores, for test_hf_served (docs/serving.md
§13): tests/data/hf/cross_encoder/ with config.json, model.safetensors, BertTokenizerFast's
files and golden.tsv, one line per (query, passage): query<TAB>passage<TAB>the raw logit
(repr of the float32) that transformers computes; CrossEncoder's default score is its sigmoid.

    .venv-interop/bin/python tests/reference/hf_served_golden.py tests/data/hf/cross_encoder
"""
import os
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

PAIRS = [("who wrote the play", "the play was written by a man in london."),
         ("who wrote the play", "paris is a city in france."),
         ("what is the capital of france", "paris is the capital of france!"),
         ("unwanted", "runn ##ing")]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(4950)
    words = sorted({w for q, p in PAIRS for w in (q + " " + p).replace(".", " ").replace("!", " ").split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "!", "#"] + list("abcdefghijklmnopqrstuvwxyz") + [
        "##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + [w for w in words if len(w) > 1]
    with open(os.path.join(out, "vocab.txt"), "w") as fh:
        fh.write("".join(t + "\n" for t in vocab))
    tok = BertTokenizerFast(vocab_file=os.path.join(out, "vocab.txt"), do_lower_case=True, model_max_length=64)
    tok.save_pretrained(out)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, num_labels=1,
                     attn_implementation="eager")
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.classifier.weight.mul_(40.0)  # scores that differ between passages
    model.save_pretrained(out, safe_serialization=True)
    lines = []
    for q, p in PAIRS:
        enc = tok(q, p, return_tensors="pt")
        with torch.no_grad():
            logit = model(**enc).logits[0, 0].item()
        lines.append(f"{q}\t{p}\t{logit!r}")
    with open(os.path.join(out, "golden.tsv"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
