#!/usr/bin/python3
"""Golden tensors for est's run_pretraining model (encoder + masked-LM + next-sentence
heads), computed by an independent PyTorch model built from torch ops (no est code).

google-research/bert's run_pretraining.py get_masked_lm_output / get_next_sentence_output
on modeling.py's BertModel (docs/bert.md), from weights drawn here with a fixed seed.
The masked-LM output layer is TIED to bert/embeddings/word_embeddings, so that table's
gradient holds both the lookup's and the output layer's part. Writes, in the format of
bert_golden.py (manifest.txt + tensors.bin + bert_config.json):

  tests/data/golden/pretrain_h32_l2_s12/

Tensors: inputs (input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
masked_lm_weights, next_sentence_labels; integers stored as exact float32), every
parameter ("param:<TF name>"), masked_lm_example_loss [B*P], masked_lm_loss,
next_sentence_example_loss [B], next_sentence_loss, loss, the eval metrics
(masked_lm_accuracy weighted, next_sentence_accuracy), every gradient of the total loss
("grad:<name>"), the losses and parameters after 3 AdamWeightDecay steps ("step3:<name>").
Dropout off.

Run from the repository root:  /usr/bin/python3 tests/reference/pretraining_golden.py
(Debian python3-torch 1.13; deterministic on CPU.)
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_golden as bg  # noqa: E402  (its helpers: truncated_normal, layer_norm, gelu_tanh, optimizer)

NAME = "pretrain_h32_l2_s12"
CFG = dict(vocab_size=41, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
           hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
           max_position_embeddings=16, type_vocab_size=2, initializer_range=0.02)
B, S, P, SEED = 3, 12, 4, 5


def param_specs(cfg):
    H = cfg["hidden_size"]
    specs = bg.param_specs(cfg, 2)[:-2]  # the encoder's, without the classifier head
    specs += [
        ("cls/predictions/transform/dense/kernel", (H, H), "w"), ("cls/predictions/transform/dense/bias", (H,), "b"),
        ("cls/predictions/transform/LayerNorm/beta", (H,), "beta"),
        ("cls/predictions/transform/LayerNorm/gamma", (H,), "gamma"),
        ("cls/predictions/output_bias", (cfg["vocab_size"],), "b"),
        ("cls/seq_relationship/output_weights", (2, H), "w"), ("cls/seq_relationship/output_bias", (2,), "b"),
    ]
    return specs


def make_params(cfg, gen):
    params = {}
    for name, shape, kind in param_specs(cfg):
        if kind == "w":
            t = bg.truncated_normal(shape, 0.2, gen)
        elif kind == "gamma":
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            t = 0.1 * torch.randn(shape, generator=gen)
        params[name] = t.float().requires_grad_(True)
    return params


def encoder(p, cfg, ids, mask, segs):
    Bn, Sn = ids.shape
    H, N = cfg["hidden_size"], cfg["num_attention_heads"]
    Dh = H // N
    x = p["bert/embeddings/word_embeddings"][ids]
    onehot = torch.nn.functional.one_hot(segs, cfg["type_vocab_size"]).float()
    x = x + onehot @ p["bert/embeddings/token_type_embeddings"]
    x = x + p["bert/embeddings/position_embeddings"][:Sn].unsqueeze(0)
    x = bg.layer_norm(x, p["bert/embeddings/LayerNorm/gamma"], p["bert/embeddings/LayerNorm/beta"])
    x = x.reshape(Bn * Sn, H)
    additive = (1.0 - mask.float()).reshape(Bn, 1, 1, Sn) * -10000.0
    for l in range(cfg["num_hidden_layers"]):
        pre = "bert/encoder/layer_%d/" % l

        def dense(t, n):
            return t @ p[pre + n + "/kernel"] + p[pre + n + "/bias"]

        def heads(t):
            return t.reshape(Bn, Sn, N, Dh).permute(0, 2, 1, 3)

        q, k, v = (heads(dense(x, "attention/self/" + n)) for n in ("query", "key", "value"))
        probs = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(Dh)) + additive, dim=-1)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(Bn * Sn, H)
        a = bg.layer_norm(dense(ctx, "attention/output/dense") + x,
                          p[pre + "attention/output/LayerNorm/gamma"], p[pre + "attention/output/LayerNorm/beta"])
        h = bg.gelu_tanh(dense(a, "intermediate/dense"))
        x = bg.layer_norm(dense(h, "output/dense") + a, p[pre + "output/LayerNorm/gamma"],
                          p[pre + "output/LayerNorm/beta"])
    first = x.reshape(Bn, Sn, H)[:, 0, :]
    pooled = torch.tanh(first @ p["bert/pooler/dense/kernel"] + p["bert/pooler/dense/bias"])
    return x, pooled


def forward(p, cfg, ids, mask, segs, positions, lm_ids, lm_w, ns_labels):
    seq, pooled = encoder(p, cfg, ids, mask, segs)
    Bn, Sn = ids.shape
    flat = (positions + (torch.arange(Bn) * Sn).unsqueeze(1)).reshape(-1)   # gather_indexes
    x = seq[flat]
    x = bg.gelu_tanh(x @ p["cls/predictions/transform/dense/kernel"] + p["cls/predictions/transform/dense/bias"])
    x = bg.layer_norm(x, p["cls/predictions/transform/LayerNorm/gamma"], p["cls/predictions/transform/LayerNorm/beta"])
    logits = x @ p["bert/embeddings/word_embeddings"].t() + p["cls/predictions/output_bias"]
    log_probs = torch.log_softmax(logits, dim=-1)
    ids_flat, w = lm_ids.reshape(-1), lm_w.reshape(-1)
    lm_example = -log_probs.gather(1, ids_flat.unsqueeze(1)).squeeze(1)
    lm_loss = (w * lm_example).sum() / (w.sum() + 1e-5)
    ns_logits = pooled @ p["cls/seq_relationship/output_weights"].t() + p["cls/seq_relationship/output_bias"]
    ns_example = -torch.log_softmax(ns_logits, dim=-1).gather(1, ns_labels.reshape(-1, 1)).squeeze(1)
    ns_loss = ns_example.mean()
    lm_acc = (w * (logits.argmax(-1) == ids_flat).float()).sum() / w.sum()
    ns_acc = (ns_logits.argmax(-1) == ns_labels.reshape(-1)).float().mean()
    return dict(masked_lm_example_loss=lm_example, masked_lm_loss=lm_loss, next_sentence_example_loss=ns_example,
                next_sentence_loss=ns_loss, loss=lm_loss + ns_loss, masked_lm_accuracy=lm_acc,
                next_sentence_accuracy=ns_acc)


def make_inputs(gen):
    """Padding per example; P slots with the last one or two padded (position 0, id 0,
    weight 0) and, in example 0, one position masked twice (its gradient rows add)."""
    V = CFG["vocab_size"]
    ids = torch.zeros(B, S, dtype=torch.long)
    mask = torch.zeros(B, S, dtype=torch.long)
    segs = torch.zeros(B, S, dtype=torch.long)
    positions = torch.zeros(B, P, dtype=torch.long)
    lm_ids = torch.zeros(B, P, dtype=torch.long)
    lm_w = torch.zeros(B, P)
    for b in range(B):
        length = S if b == B - 1 else S - 2 - 3 * b
        ids[b, :length] = torch.randint(1, V, (length,), generator=gen)
        mask[b, :length] = 1
        segs[b, length // 2:length] = 1
        real = P - (b % 2) - (1 if b == 0 else 0)
        pos = torch.randperm(length - 1, generator=gen)[:real] + 1
        if b == 0:
            pos[-1] = pos[0]
        positions[b, :real] = pos
        lm_ids[b, :real] = torch.randint(0, V, (real,), generator=gen)
        lm_w[b, :real] = 1.0
    ns_labels = torch.randint(0, 2, (B, 1), generator=gen)
    return ids, mask, segs, positions, lm_ids, lm_w, ns_labels


def main():
    gen = torch.Generator().manual_seed(SEED)
    params = make_params(CFG, gen)
    inputs = make_inputs(gen)
    entries = []

    def add(n, t):
        entries.append((n, t.detach().float().contiguous().clone().reshape(-1) if t.dim() == 0 else
                        t.detach().float().contiguous().clone()))

    for n, t in zip(("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                     "masked_lm_weights", "next_sentence_labels"), inputs):
        add(n, t)
    for n, t in params.items():
        add("param:" + n, t)
    out = forward(params, CFG, *inputs)
    out["loss"].backward()
    for k, v in out.items():
        add(k, v)
    for n, t in params.items():
        add("grad:" + n, t.grad)
    slots = {n: (torch.zeros_like(t), torch.zeros_like(t)) for n, t in params.items()}
    losses = []
    for t in range(bg.STEPS):
        for q in params.values():
            q.grad = None
        step = forward(params, CFG, *inputs)
        step["loss"].backward()
        losses.append(step["loss"].item())
        bg.adam_weight_decay_step(params, {n: q.grad for n, q in params.items()}, slots, t)
    for n, t in params.items():
        add("step3:" + n, t)
    add("step_losses", torch.tensor(losses))

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    d = os.path.join(root, "data", "golden", NAME)
    lines = ["meta batch %d" % B, "meta seq_len %d" % S, "meta max_predictions %d" % P,
             "meta init_lr %.9g" % bg.INIT_LR, "meta num_train_steps %d" % bg.NUM_TRAIN_STEPS,
             "meta num_warmup_steps %d" % bg.NUM_WARMUP_STEPS, "meta steps %d" % bg.STEPS]
    offset = bg.write_manifest(d, CFG, lines, entries)  # bert_config.json, tensors.bin, manifest.txt
    print("%s: %d floats, loss %.6f (mlm %.6f, nsp %.6f), step losses %s" % (
        NAME, offset, out["loss"].item(), out["masked_lm_loss"].item(), out["next_sentence_loss"].item(), losses))


if __name__ == "__main__":
    sys.exit(main())
