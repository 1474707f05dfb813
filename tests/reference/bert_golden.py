#!/usr/bin/python3
"""Golden tensors for est's BERT classifier, computed by an independent PyTorch model.

Builds google-research/bert's classifier (modeling.py BertModel + run_classifier.py
create_model, as docs/bert.md describes them) directly from torch ops -- no est code, no
HuggingFace -- from weights drawn here with a fixed seed, then writes, per configuration:

  tests/data/golden/<name>/bert_config.json  the BertConfig (loaded by est's JSON reader)
  tests/data/golden/<name>/manifest.txt      one line per tensor: name offset count dims...
  tests/data/golden/<name>/tensors.bin       little-endian float32, the tensors back to back

Tensors: the inputs (input_ids, input_mask, segment_ids, label_ids, stored as float32,
exact), every parameter ("param:<TF name>"), logits, per_example_loss, loss, every
parameter gradient of the mean loss ("grad:<name>"), and every parameter after 3 steps of
BERT's AdamWeightDecay ("step3:<name>") with global-norm clipping 1.0 and the warmup +
linear-decay schedule (lr = 0 at step 0, so steps 1 and 2 move the weights). Dropout off.
Lines starting with "meta" carry the optimizer settings.

Also the SQuAD head's golden (SQUAD_CONFIGS, run_squad.py create_model + compute_loss on the
same encoder): start/end logits, the loss and every parameter gradient.

Run from the repository root:  /usr/bin/python3 tests/reference/bert_golden.py [NAME...]
(the classifier goldens: Debian python3-torch 1.13; squad_h48_l2_s24: the torch of make
interop's .venv-interop, `.venv-interop/bin/python tests/reference/bert_golden.py
squad_h48_l2_s24`; deterministic on CPU.)
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

CONFIGS = [
    # name, config, num_labels, batch, seq_len, seed
    ("h64_l2_s16", dict(vocab_size=50, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, hidden_act="gelu", hidden_dropout_prob=0.1,
                        attention_probs_dropout_prob=0.1, max_position_embeddings=16, type_vocab_size=2,
                        initializer_range=0.02), 2, 4, 16, 1),
    ("h36_l2_s40_c3", dict(vocab_size=57, hidden_size=36, num_hidden_layers=2, num_attention_heads=3,
                           intermediate_size=50, hidden_act="gelu", hidden_dropout_prob=0.1,
                           attention_probs_dropout_prob=0.1, max_position_embeddings=40, type_vocab_size=2,
                           initializer_range=0.02), 3, 3, 40, 2),
]

# AdamWeightDecay settings for the 3-step check (optimization.py create_optimizer).
INIT_LR = 1e-3
NUM_TRAIN_STEPS = 10
NUM_WARMUP_STEPS = 2
STEPS = 3


def param_specs(cfg, num_labels, head="classifier"):
    """(TF name, shape, kind) in declaration order; kind picks the random draw. head:
    run_classifier's output layer, or run_squad's ("squad": two logits per position)."""
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    specs = [
        ("bert/embeddings/word_embeddings", (cfg["vocab_size"], H), "w"),
        ("bert/embeddings/token_type_embeddings", (cfg["type_vocab_size"], H), "w"),
        ("bert/embeddings/position_embeddings", (cfg["max_position_embeddings"], H), "w"),
        ("bert/embeddings/LayerNorm/beta", (H,), "beta"),
        ("bert/embeddings/LayerNorm/gamma", (H,), "gamma"),
    ]
    for l in range(cfg["num_hidden_layers"]):
        p = "bert/encoder/layer_%d/" % l
        for n in ("query", "key", "value"):
            specs += [(p + "attention/self/%s/kernel" % n, (H, H), "w"), (p + "attention/self/%s/bias" % n, (H,), "b")]
        specs += [
            (p + "attention/output/dense/kernel", (H, H), "w"), (p + "attention/output/dense/bias", (H,), "b"),
            (p + "attention/output/LayerNorm/beta", (H,), "beta"), (p + "attention/output/LayerNorm/gamma", (H,), "gamma"),
            (p + "intermediate/dense/kernel", (H, I), "w"), (p + "intermediate/dense/bias", (I,), "b"),
            (p + "output/dense/kernel", (I, H), "w"), (p + "output/dense/bias", (H,), "b"),
            (p + "output/LayerNorm/beta", (H,), "beta"), (p + "output/LayerNorm/gamma", (H,), "gamma"),
        ]
    specs += [
        ("bert/pooler/dense/kernel", (H, H), "w"), ("bert/pooler/dense/bias", (H,), "b"),
    ]
    if head == "squad":
        specs += [("cls/squad/output_weights", (2, H), "w"), ("cls/squad/output_bias", (2,), "b")]
    else:
        specs += [("output_weights", (num_labels, H), "w"), ("output_bias", (num_labels,), "b")]
    return specs


def truncated_normal(shape, std, gen):
    # TF1 truncated_normal: redraw values beyond 2 sigma
    t = torch.randn(shape, generator=gen)
    while True:
        bad = t.abs() > 2.0
        if not bad.any():
            return t * std
        t[bad] = torch.randn(int(bad.sum()), generator=gen)


def make_params(cfg, num_labels, gen, head="classifier"):
    """Weights with more spread than BERT's init (std 0.02 makes attention nearly uniform
    and the net nearly linear, which would test little): kernels/tables N(0, 0.2^2)
    truncated at 2 sigma, biases and LayerNorm beta N(0, 0.1^2), gamma 1 + N(0, 0.1^2)."""
    params = {}
    for name, shape, kind in param_specs(cfg, num_labels, head):
        if kind == "w":
            t = truncated_normal(shape, 0.2, gen)
        elif kind == "gamma":
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            t = 0.1 * torch.randn(shape, generator=gen)
        params[name] = t.float().requires_grad_(True)
    return params


def layer_norm(x, gamma, beta):
    # TF contrib layer_norm: biased variance, eps 1e-12
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps=1e-12)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


def encode(p, cfg, ids, mask, segs):
    """modeling.BertModel: the sequence output [B*S, H] and the pooled output [B, H]."""
    B, S = ids.shape
    H, N = cfg["hidden_size"], cfg["num_attention_heads"]
    Dh = H // N
    # embeddings: gather + one-hot token type + positions, LayerNorm (dropout off)
    x = p["bert/embeddings/word_embeddings"][ids]
    onehot = torch.nn.functional.one_hot(segs, cfg["type_vocab_size"]).float()
    x = x + onehot @ p["bert/embeddings/token_type_embeddings"]
    x = x + p["bert/embeddings/position_embeddings"][:S].unsqueeze(0)
    x = layer_norm(x, p["bert/embeddings/LayerNorm/gamma"], p["bert/embeddings/LayerNorm/beta"])
    x = x.reshape(B * S, H)
    additive = (1.0 - mask.float()).reshape(B, 1, 1, S) * -10000.0
    for l in range(cfg["num_hidden_layers"]):
        pre = "bert/encoder/layer_%d/" % l

        def dense(t, n):
            return t @ p[pre + n + "/kernel"] + p[pre + n + "/bias"]

        def heads(t):
            return t.reshape(B, S, N, Dh).permute(0, 2, 1, 3)

        q = heads(dense(x, "attention/self/query"))
        k = heads(dense(x, "attention/self/key"))
        v = heads(dense(x, "attention/self/value"))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(Dh)) + additive
        probs = torch.softmax(scores, dim=-1)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(B * S, H)
        a = layer_norm(dense(ctx, "attention/output/dense") + x,
                       p[pre + "attention/output/LayerNorm/gamma"], p[pre + "attention/output/LayerNorm/beta"])
        h = gelu_tanh(dense(a, "intermediate/dense"))
        x = layer_norm(dense(h, "output/dense") + a,
                       p[pre + "output/LayerNorm/gamma"], p[pre + "output/LayerNorm/beta"])
    first = x.reshape(B, S, H)[:, 0, :]
    pooled = torch.tanh(first @ p["bert/pooler/dense/kernel"] + p["bert/pooler/dense/bias"])
    return x, pooled


def forward(p, cfg, num_labels, ids, mask, segs, labels):
    _, pooled = encode(p, cfg, ids, mask, segs)
    logits = pooled @ p["output_weights"].t() + p["output_bias"]
    log_probs = torch.log_softmax(logits, dim=-1)
    one_hot = torch.nn.functional.one_hot(labels, num_labels).float()
    per_example = -(one_hot * log_probs).sum(dim=-1)
    return logits, per_example, per_example.mean()


def learning_rate(t):
    # float32 arithmetic as the TF graph (docs/optimizer.md §1)
    f = np.float32
    decay = f(INIT_LR) * (f(1) - f(min(t, NUM_TRAIN_STEPS)) / f(NUM_TRAIN_STEPS))
    if NUM_WARMUP_STEPS > 0 and t < NUM_WARMUP_STEPS:
        return f(INIT_LR) * (f(t) / f(NUM_WARMUP_STEPS))
    return f(decay)


def adam_weight_decay_step(params, grads, slots, t):
    lr = float(learning_rate(t))
    with torch.no_grad():
        norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values())).float()
        scale = 1.0 / torch.maximum(norm, torch.tensor(1.0))
        for name, p in params.items():
            g = grads[name] * scale
            m, v = slots[name]
            m.mul_(0.9).add_(0.1 * g)
            v.mul_(0.999).add_(0.001 * g * g)
            u = m / (torch.sqrt(v) + 1e-6)
            if not any(s in name for s in ("LayerNorm", "layer_norm", "bias")):
                u = u + 0.01 * p
            p.sub_(lr * u)


def make_inputs(cfg, num_labels, B, S, gen):
    """Each example: [CLS]-like first token, segment A then segment B, then padding; the
    real lengths differ per example and the last example has no padding."""
    ids = torch.zeros(B, S, dtype=torch.long)
    mask = torch.zeros(B, S, dtype=torch.long)
    segs = torch.zeros(B, S, dtype=torch.long)
    for b in range(B):
        length = S if b == B - 1 else max(4, S - 3 - 5 * b)
        len_a = max(2, length // 2 - b)
        ids[b, :length] = torch.randint(1, cfg["vocab_size"], (length,), generator=gen)
        mask[b, :length] = 1
        segs[b, len_a:length] = 1
    labels = torch.randint(0, num_labels, (B,), generator=gen)
    return ids, mask, segs, labels


def write_manifest(d, cfg, lines, entries):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "bert_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    offset = 0
    with open(os.path.join(d, "tensors.bin"), "wb") as f:
        for n, t in entries:
            arr = t.numpy().astype("<f4")
            f.write(arr.tobytes())
            lines.append("%s %d %d %s" % (n, offset, arr.size, " ".join(str(s) for s in arr.shape) or "-"))
            offset += arr.size
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return offset


def write(outdir, name, cfg, num_labels, B, S, seed):
    gen = torch.Generator().manual_seed(seed)
    params = make_params(cfg, num_labels, gen)
    ids, mask, segs, labels = make_inputs(cfg, num_labels, B, S, gen)
    entries = []  # (name, tensor)

    def add(n, t):
        entries.append((n, t.detach().float().contiguous().clone()))

    add("input_ids", ids)
    add("input_mask", mask)
    add("segment_ids", segs)
    add("label_ids", labels)
    for n, t in params.items():
        add("param:" + n, t)
    logits, per_example, loss = forward(params, cfg, num_labels, ids, mask, segs, labels)
    loss.backward()
    add("logits", logits)
    add("per_example_loss", per_example)
    add("loss", loss.reshape(1))
    for n, t in params.items():
        add("grad:" + n, t.grad)
    # 3 optimizer steps, each on a fresh forward/backward of the same batch
    slots = {n: (torch.zeros_like(t), torch.zeros_like(t)) for n, t in params.items()}
    losses = []
    for t in range(STEPS):
        for q in params.values():
            q.grad = None
        _, _, step_loss = forward(params, cfg, num_labels, ids, mask, segs, labels)
        step_loss.backward()
        losses.append(step_loss.item())
        adam_weight_decay_step(params, {n: q.grad for n, q in params.items()}, slots, t)
    for n, t in params.items():
        add("step3:" + n, t)
    add("step_losses", torch.tensor(losses))

    lines = ["meta num_labels %d" % num_labels, "meta batch %d" % B, "meta seq_len %d" % S,
             "meta init_lr %.9g" % INIT_LR, "meta num_train_steps %d" % NUM_TRAIN_STEPS,
             "meta num_warmup_steps %d" % NUM_WARMUP_STEPS, "meta steps %d" % STEPS]
    offset = write_manifest(os.path.join(outdir, name), cfg, lines, entries)
    print("%s: %d floats, loss %.6f, step losses %s" % (name, offset, loss.item(), losses))


def squad_forward(p, cfg, ids, mask, segs, starts, ends):
    """run_squad.py create_model + compute_loss: logits over every position (padding too),
    loss = (mean start cross-entropy + mean end cross-entropy) / 2."""
    B, S = ids.shape
    x, _ = encode(p, cfg, ids, mask, segs)
    logits = (x @ p["cls/squad/output_weights"].t() + p["cls/squad/output_bias"]).reshape(B, S, 2)
    start_logits, end_logits = logits[:, :, 0], logits[:, :, 1]

    def compute_loss(lg, positions):
        one_hot = torch.nn.functional.one_hot(positions, S).float()
        return -(one_hot * torch.log_softmax(lg, dim=-1)).sum(dim=-1).mean()

    return start_logits, end_logits, (compute_loss(start_logits, starts) + compute_loss(end_logits, ends)) / 2.0


def write_squad(outdir, name, cfg, B, S, seed):
    """The squad head's golden: inputs, start/end positions, parameters, start_logits,
    end_logits, loss and every parameter gradient (the pooler's are zero: the head does
    not read the pooled output)."""
    gen = torch.Generator().manual_seed(seed)
    params = make_params(cfg, 2, gen, head="squad")
    ids, mask, segs, starts = make_inputs(cfg, S, B, S, gen)
    ends = torch.randint(0, S, (B,), generator=gen)
    entries = [("input_ids", ids), ("input_mask", mask), ("segment_ids", segs), ("start_positions", starts),
               ("end_positions", ends)]
    entries += [("param:" + n, t) for n, t in params.items()]
    start_logits, end_logits, loss = squad_forward(params, cfg, ids, mask, segs, starts, ends)
    loss.backward()
    entries += [("start_logits", start_logits), ("end_logits", end_logits), ("loss", loss.reshape(1))]
    entries += [("grad:" + n, t.grad if t.grad is not None else torch.zeros_like(t)) for n, t in params.items()]
    entries = [(n, t.detach().float().contiguous().clone()) for n, t in entries]
    lines = ["meta num_labels 2", "meta batch %d" % B, "meta seq_len %d" % S]
    total = write_manifest(os.path.join(outdir, name), cfg, lines, entries)
    print("%s: %d floats, loss %.6f" % (name, total, loss.item()))


SQUAD_CONFIGS = [
    # name, config, batch, seq_len, seed
    ("squad_h48_l2_s24", dict(vocab_size=61, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=96, hidden_act="gelu", hidden_dropout_prob=0.1,
                              attention_probs_dropout_prob=0.1, max_position_embeddings=32, type_vocab_size=2,
                              initializer_range=0.02), 3, 24, 3),
]


def main():
    """usage: bert_golden.py [NAME...]: the configurations named (all without arguments)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = os.path.join(root, "data", "golden")
    wanted = set(sys.argv[1:])
    for name, cfg, num_labels, B, S, seed in CONFIGS:
        if not wanted or name in wanted:
            write(outdir, name, cfg, num_labels, B, S, seed)
    for name, cfg, B, S, seed in SQUAD_CONFIGS:
        if not wanted or name in wanted:
            write_squad(outdir, name, cfg, B, S, seed)


if __name__ == "__main__":
    sys.exit(main())
