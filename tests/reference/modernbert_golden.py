"""Tiny ModernBERT directories with transformers' outputs and gradients, for
tests/test_encoder_golden.c and tests/test_encoder_classifier.c (docs/bert.md §11).

ModernBERT needs transformers >= 4.48, newer than the interop pins (4.44.2), so this script has
its own venv; CPU, one thread, eager attention:

    python3 -m venv /tmp/venv-modern
    /tmp/venv-modern/bin/pip install torch==2.4.1 transformers==4.48.3 tokenizers==0.21.4 \
        safetensors==0.4.5 numpy==1.26.4
    /tmp/venv-modern/bin/python tests/reference/modernbert_golden.py tests/data/encoders

(the goldens were written with exactly those: torch 2.4.1+cu121 on CPU, transformers 4.48.3.)

Writes, each a randomly initialised model saved by save_pretrained (safetensors) with a
WordPiece vocab.txt (the maths does not depend on the tokenizer):
  modernbert/      ModernBertModel: hidden 24 = 3 heads of 8 (rotary needs an even head size),
                   intermediate 20 (GeGLU: Wi [40, 24]), 3 layers with
                   global_attn_every_n_layers 2 (layers 0 and 2 global, layer 1 a sliding window),
                   local_attention 8 (keys within 4 tokens), global_rope_theta 160000,
                   local_rope_theta 10000, norm_eps 1e-5, no biases (ModernBERT's default);
                   inputs [2, 24], longer than the window, the second example padded after 21
                   tokens (a padded query keeps real keys within its window: transformers and
                   est then agree on its row too)
  modernbert_bias/ the same with attention_bias, mlp_bias and norm_bias true
and golden.safetensors beside each: input_ids / input_mask / segment_ids (I32), hidden_states.<i>
for i = 0 (the embeddings) .. num_layers (transformers' last one is before final_norm),
last_hidden_state (after final_norm), probe_sequence and grad.<name> of every parameter for
loss = sum(last_hidden_state * probe_sequence).

Then ModernBertForSequenceClassification, num_labels 3, room for 64 tokens:
  modernbert_cls/       classifier_pooling "cls", no biases
  modernbert_cls_mean/  classifier_pooling "mean", every bias on (classifier_bias too)
each with golden.safetensors: the inputs, label_ids (I32 [2]), logits [2,3], loss (mean
cross-entropy) and grad.<name> of every parameter after loss.backward().
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import ModernBertConfig, ModernBertForSequenceClassification, ModernBertModel

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") + [
    "the", "movie", "good", "bad", "##s", "##ing", "##ed", "not", "fun"]
B, S, CUT = 2, 24, 21


def inputs(g):
    ids = torch.randint(5, len(VOCAB), (B, S), generator=g, dtype=torch.int32)
    ids[:, 0] = 2
    mask = torch.ones(B, S, dtype=torch.int32)
    mask[1, CUT:] = 0
    ids[1, CUT:] = 0
    segs = torch.zeros(B, S, dtype=torch.int32)
    return ids, mask, segs


def config(bias, **kw):
    return ModernBertConfig(vocab_size=len(VOCAB), hidden_size=24, intermediate_size=20, num_hidden_layers=3,
                            num_attention_heads=3, global_attn_every_n_layers=2, local_attention=8,
                            global_rope_theta=160000.0, local_rope_theta=10000.0, norm_eps=1e-5,
                            attention_bias=bias, mlp_bias=bias, norm_bias=bias, pad_token_id=0, bos_token_id=2,
                            eos_token_id=3, cls_token_id=2, sep_token_id=3, reference_compile=False,
                            attn_implementation="eager", **kw)


def save_model(dirname, model):
    os.makedirs(dirname, exist_ok=True)
    model.eval()
    with torch.no_grad():  # non-trivial norms and biases, so a mapping mistake shows
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(dirname, safe_serialization=True)
    with open(os.path.join(dirname, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in VOCAB))


def grads(golden, model):
    for name, p in model.named_parameters():
        if p.grad is not None:
            golden["grad." + name] = p.grad.detach().contiguous()


def write(dirname, model):
    save_model(dirname, model)
    g = torch.Generator().manual_seed(7)
    ids, mask, segs = inputs(g)
    out = model(input_ids=ids.long(), attention_mask=mask.long(), output_hidden_states=True)
    golden = {"input_ids": ids, "input_mask": mask, "segment_ids": segs,
              "last_hidden_state": out.last_hidden_state.detach().contiguous()}
    for i, h in enumerate(out.hidden_states):
        golden["hidden_states.%d" % i] = h.detach().contiguous()
    probe = torch.randn(out.last_hidden_state.shape, generator=g)
    golden["probe_sequence"] = probe
    model.zero_grad()
    (out.last_hidden_state * probe).sum().backward()
    grads(golden, model)
    save_file(golden, os.path.join(dirname, "golden.safetensors"))


def write_cls(dirname, model):
    save_model(dirname, model)
    g = torch.Generator().manual_seed(11)
    ids, mask, segs = inputs(g)
    labels = torch.tensor([2, 0], dtype=torch.int32)
    model.zero_grad()
    out = model(input_ids=ids.long(), attention_mask=mask.long(), labels=labels.long())
    out.loss.backward()
    golden = {"input_ids": ids, "input_mask": mask, "segment_ids": segs, "label_ids": labels,
              "logits": out.logits.detach().contiguous(), "loss": out.loss.detach().reshape(1)}
    grads(golden, model)
    save_file(golden, os.path.join(dirname, "golden.safetensors"))


def main():
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    root = sys.argv[1]
    write(os.path.join(root, "modernbert"), ModernBertModel(config(False, max_position_embeddings=32)))
    write(os.path.join(root, "modernbert_bias"), ModernBertModel(config(True, max_position_embeddings=32)))
    write_cls(os.path.join(root, "modernbert_cls"),
              ModernBertForSequenceClassification(config(False, max_position_embeddings=64, num_labels=3,
                                                         classifier_pooling="cls", classifier_dropout=0.0)))
    write_cls(os.path.join(root, "modernbert_cls_mean"),
              ModernBertForSequenceClassification(config(True, max_position_embeddings=64, num_labels=3,
                                                         classifier_pooling="mean", classifier_bias=True,
                                                         classifier_dropout=0.0)))


if __name__ == "__main__":
    main()
