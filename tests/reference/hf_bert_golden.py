"""Tiny HuggingFace BERT directories and their outputs, for test_hf_model (docs/hf.md).

Run from the repository root with the interop venv (transformers 4.44.2, torch 2.4.1,
tokenizers 0.19.1, tests/interop/requirements.txt):

    .venv-interop/bin/python tests/reference/hf_bert_golden.py tests/data/hf

Writes, with random weights (seeded):
  cls_gelu/  BertForSequenceClassification, 3 labels, hidden_act "gelu" (erf GELU)
  qa_tanh/   BertForQuestionAnswering, hidden_act "gelu_new" (tanh GELU)
each: config.json, model.safetensors, vocab.txt, tokenizer.json, and golden.safetensors with
the inputs (input_ids / input_mask / segment_ids, I32 [2,8]) and the model's outputs
(sequence_output [2,8,32] = last_hidden_state, pooled_output [2,32], logits).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'") + [
    "the", "movie", "film", "good", "bad", "great", "##s", "##ing", "##ed", "##ly", "un", "##want",
    "runn", "play", "is", "was", "not", "very", "and", "of", "to", "it", "this", "that", "fun", "boring",
    "##a", "##e", "##i", "##o", "##n", "##t", "##r", "##l", "\u4e2d", "\u6587", "caf\u00e9", "##\u00e9",
]


def tokenizer_json(vocab, out):
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    tok.save(out)


def write(dirname, model_class, hidden_act, extra):
    os.makedirs(dirname, exist_ok=True)
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=16, type_vocab_size=2, hidden_act=hidden_act,
                     attn_implementation="eager", **extra)
    model = model_class(cfg).eval()
    with torch.no_grad():  # non-trivial biases and norms, so a mapping mistake shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(dirname, safe_serialization=True)
    with open(os.path.join(dirname, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in VOCAB))
    tokenizer_json(VOCAB, os.path.join(dirname, "tokenizer.json"))
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(5, len(VOCAB), (2, 8), generator=g, dtype=torch.int32)
    ids[:, 0] = 2
    mask = torch.ones(2, 8, dtype=torch.int32)
    mask[1, 5:] = 0
    ids[1, 5:] = 0
    segs = torch.zeros(2, 8, dtype=torch.int32)
    segs[0, 4:] = 1
    with torch.no_grad():
        base = model.bert(input_ids=ids.long(), attention_mask=mask.long(), token_type_ids=segs.long())
        out = model(input_ids=ids.long(), attention_mask=mask.long(), token_type_ids=segs.long())
    golden = {"input_ids": ids, "input_mask": mask, "segment_ids": segs,
              "sequence_output": base.last_hidden_state.contiguous()}
    if base.pooler_output is not None:
        golden["pooled_output"] = base.pooler_output.contiguous()
    if hasattr(out, "logits"):
        golden["logits"] = out.logits.contiguous()
    else:
        golden["start_logits"] = out.start_logits.contiguous()
        golden["end_logits"] = out.end_logits.contiguous()
    save_file(golden, os.path.join(dirname, "golden.safetensors"))


def main():
    torch.manual_seed(1234)
    root = sys.argv[1]
    write(os.path.join(root, "cls_gelu"), BertForSequenceClassification, "gelu",
          {"num_labels": 3, "id2label": {0: "neg", 1: "neu", 2: "pos"}, "label2id": {"neg": 0, "neu": 1, "pos": 2}})
    write(os.path.join(root, "qa_tanh"), BertForQuestionAnswering, "gelu_new", {})


if __name__ == "__main__":
    main()
