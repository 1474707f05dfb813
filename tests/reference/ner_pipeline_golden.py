"""A tiny random BertForTokenClassification directory and transformers' token-classification
pipeline over it, for test_token_classifier_serving (docs/ner.md §6).

Run from the repository root with the interop venv (transformers 4.44.2, torch 2.4.1,
tokenizers 0.19.1, tests/interop/requirements.txt):

    .venv-interop/bin/python tests/reference/ner_pipeline_golden.py tests/data/hf/tok_ner

Writes, with random weights (seeded; the classifier's scaled up so that the labels vary from
token to token): config.json (id2label of 7 IOB2 tags and one bare "MISC"), model.safetensors,
vocab.txt, tokenizer.json and tokenizer_config.json (BertTokenizerFast, lower-casing), and
pipeline_golden.jsonl: one line per text and aggregation strategy,
{"text", "aggregation_strategy", "entities": the pipeline's list}, scores as Python floats.
"""
import json
import os
import sys

import torch
from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast, pipeline

WORDS = ["mary", "smith", "met", "john", "in", "berlin", "paris", "the", "bank", "of", "new", "york", "said",
         "cafe", "don", "un", "##want", "##ed", "runn", "##ing", "reuters", "fifa"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-()")
         + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + WORDS)
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "MISC"]
TEXTS = [
    "Mary Smith met John in Berlin.",
    "The Bank of New York said unwanted running, Café!",
    "  Reuters   and FIFA met in Paris (New York) don't they?",
    "Zürich ist schön: 42 € or 中文 Smithing",
    "john's mary-smith, un-wanted... berlin!!",
    "x",
]
STRATEGIES = ["none", "simple", "first", "average", "max"]


def plain(v):
    if hasattr(v, "item"):
        return v.item()
    return v


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(4949)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in VOCAB))
    tok = BertTokenizerFast(vocab_file=os.path.join(out, "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(out)
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
                     num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                     label2id={l: i for i, l in enumerate(LABELS)}, attn_implementation="eager")
    model = BertForTokenClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.classifier.weight.mul_(12.0)
    model.save_pretrained(out, safe_serialization=True)
    lines = []
    for text in TEXTS:
        for strategy in STRATEGIES:
            nlp = pipeline("token-classification", model=model, tokenizer=tok, aggregation_strategy=strategy)
            ents = [{k: plain(v) for k, v in e.items()} for e in nlp(text)]
            lines.append(json.dumps({"text": text, "aggregation_strategy": strategy, "entities": ents},
                                    ensure_ascii=False))
    with open(os.path.join(out, "pipeline_golden.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
