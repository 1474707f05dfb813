#!/usr/bin/python3
"""The PyTorch peer of bench/bench_bert.c: the same BERT classifier, the same step.

  bert_torch.py --model tiny|mini|small|base [--mode train|infer] [--batch 32] [--seq 128]
                [--iters N] [--warmup W] [--threads 2] [--head classifier|squad]

--head squad: the SQuAD model of run_squad.py instead (BertSquad: output weights [2, H] on
every position, loss = mean of the start and end cross-entropies; bench/run_squad_model.sh).

Training step = zero grads, forward with dropout (hidden 0.1, attention 0.1, classifier
0.1), backward, global-norm clip 1.0, BERT's AdamWeightDecay (no bias correction, eps
outside the sqrt, decay 0.01 except LayerNorm/bias) written with torch._foreach ops, the
fastest form torch 1.13 offers for it. Inference = forward in eval mode under
torch.inference_mode(). GELU is the tanh form (F.gelu(approximate="tanh")).

Prints one line: "torch <model> <mode> <ex/s> ex/s (...)". Run it through bench/run_bert.sh,
which unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for both programs (so both get their
AVX-512 kernels) and sets OMP_NUM_THREADS / OMP_WAIT_POLICY the same for both; the
thread count is also set here with torch.set_num_threads.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "base": (12, 768)}


class Layer(nn.Module):
    def __init__(self, H, N, I, p):
        super().__init__()
        self.N, self.p = N, p
        self.q, self.k, self.v = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.ao, self.ln1 = nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        self.i, self.o, self.ln2 = nn.Linear(H, I), nn.Linear(I, H), nn.LayerNorm(H, eps=1e-12)

    def forward(self, x, additive):
        B, S, H = x.shape
        N, Dh = self.N, H // self.N

        def heads(t):
            return t.view(B, S, N, Dh).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(Dh)) + additive
        probs = F.dropout(torch.softmax(scores, dim=-1), self.p, self.training)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(B, S, H)
        a = self.ln1(F.dropout(self.ao(ctx), self.p, self.training) + x)
        h = F.gelu(self.i(a), approximate="tanh")
        return self.ln2(F.dropout(self.o(h), self.p, self.training) + a)


class BertClassifier(nn.Module):
    def __init__(self, L, H, V=30522, P=512, T=2, C=2, p=0.1):
        super().__init__()
        self.word, self.pos, self.segment = nn.Embedding(V, H), nn.Embedding(P, H), nn.Embedding(T, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.layers = nn.ModuleList([Layer(H, H // 64, 4 * H, p) for _ in range(L)])
        self.pool = nn.Linear(H, H)
        self.out = nn.Linear(H, C)
        self.p = p
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(m.weight, std=0.02, a=-0.04, b=0.04)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def encode(self, ids, mask, segs):
        S = ids.shape[1]
        x = self.word(ids) + self.segment(segs) + self.pos.weight[:S].unsqueeze(0)
        x = F.dropout(self.ln(x), self.p, self.training)
        additive = (1.0 - mask.float())[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, additive)
        return x

    def forward(self, ids, mask, segs):
        x = self.encode(ids, mask, segs)
        pooled = torch.tanh(self.pool(x[:, 0]))
        return self.out(F.dropout(pooled, 0.1, self.training))


class BertSquad(BertClassifier):
    """run_squad.py create_model: cls/squad output weights [2, H] and bias [2] on every position
    of the sequence output (no dropout there); no pooler (the head does not read it)."""

    def __init__(self, L, H):
        super().__init__(L, H)
        del self.pool
        self.out = nn.Linear(H, 2)
        nn.init.trunc_normal_(self.out.weight, std=0.02, a=-0.04, b=0.04)
        nn.init.zeros_(self.out.bias)

    def forward(self, ids, mask, segs):
        start, end = self.out(self.encode(ids, mask, segs)).unbind(-1)  # [B, S] each
        return start, end


def squad_loss(logits, positions):
    """compute_loss: mean of the start and end positions' softmax cross-entropy over S."""
    (start, end), (start_positions, end_positions) = logits, positions
    return (F.cross_entropy(start, start_positions) + F.cross_entropy(end, end_positions)) / 2


class AdamWeightDecay:
    """optimization.py AdamWeightDecayOptimizer + clip_by_global_norm(1.0) + BERT's schedule."""

    def __init__(self, named_params, init_lr=2e-5, num_train_steps=1000, num_warmup_steps=100):
        self.init_lr, self.T, self.W = init_lr, num_train_steps, num_warmup_steps
        self.decay = [p for n, p in named_params if not any(s in n for s in ("ln", "bias"))]
        self.plain = [p for n, p in named_params if any(s in n for s in ("ln", "bias"))]
        self.params = self.decay + self.plain
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def lr(self, t):
        if t < self.W:
            return self.init_lr * t / self.W
        return self.init_lr * (1 - min(t, self.T) / self.T)

    @torch.no_grad()
    def step(self, t):
        grads = [p.grad for p in self.params]
        # clip_by_global_norm(1.0); torch 1.13's clip_grad_norm_ has no foreach path
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        torch._foreach_mul_(grads, (1.0 / torch.clamp(norm, min=1.0)).item())
        lr = self.lr(t)
        torch._foreach_mul_(self.m, 0.9)
        torch._foreach_add_(self.m, grads, alpha=0.1)
        torch._foreach_mul_(self.v, 0.999)
        torch._foreach_addcmul_(self.v, grads, grads, value=0.001)
        denom = torch._foreach_sqrt(self.v)
        torch._foreach_add_(denom, 1e-6)
        upd = torch._foreach_div(self.m, denom)
        nd = len(self.decay)
        torch._foreach_add_(upd[:nd], self.decay, alpha=0.01)
        torch._foreach_add_(self.params, upd, alpha=-lr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny", choices=sorted(MODELS))
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--head", default="classifier", choices=["classifier", "squad"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    L, H = MODELS[a.model]
    train = a.mode == "train"
    iters = a.iters or ((3 if train else 6) if a.model == "base" else (20 if train else 50))
    squad = a.head == "squad"
    model = BertSquad(L, H) if squad else BertClassifier(L, H)
    B, S = a.batch, a.seq
    ids = torch.randint(0, 30522, (B, S))
    mask = torch.ones(B, S, dtype=torch.long)
    segs = (torch.arange(S) >= S // 2).long().expand(B, S).contiguous()
    labels = torch.arange(B) % 2
    if squad:  # start_positions, end_positions
        labels = (torch.randint(0, S, (B,)), torch.randint(0, S, (B,)))
    loss = torch.tensor(0.0)
    if train:
        model.train()
        opt = AdamWeightDecay(list(model.named_parameters()))
    else:
        model.eval()
    t0 = None
    for it in range(a.warmup + iters):
        if it == a.warmup:
            t0 = time.perf_counter()
        if train:
            for p in model.parameters():
                p.grad = None
            logits = model(ids, mask, segs)
            loss = squad_loss(logits, labels) if squad else F.cross_entropy(logits, labels)
            loss.backward()
            opt.step(it)
        else:
            with torch.inference_mode():
                model(ids, mask, segs)
    dt = time.perf_counter() - t0
    print("torch %s %s %.2f ex/s (%.1f ms/step, %d iters, loss %.4f)" %
          (a.model, a.mode, B * iters / dt, 1e3 * dt / iters, iters, loss.item()))


if __name__ == "__main__":
    main()
