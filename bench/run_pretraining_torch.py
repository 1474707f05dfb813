#!/usr/bin/python3
"""PyTorch peer of `est run_pretraining` for bench/run_pretraining.sh: the same model_fn
(BERT post-LN encoder, tanh pooler, masked-LM head with dense + GELU + LayerNorm and logits
against the tied word-embedding table + output bias, next-sentence head, total loss,
global-norm clipping at 1.0, AdamW with weight decay 0.01), dropout 0.1, BERT's initialisation
(truncated normal, std 0.02), on random batches of the records' shapes. Prints "steps/s <x> ex/s <y>" after WARMUP untimed steps.

  bench/run_pretraining_torch.py --model tiny --batch 32 --seq 128 --pred 20 --steps 20 --threads 2
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = {"tiny": (2, 128, 2, 512), "mini": (4, 256, 4, 1024), "small": (4, 512, 8, 2048)}  # L, H, A, I
V = 30522


class Pretrainer(nn.Module):
    def __init__(self, L, H, A, I, S):
        super().__init__()
        self.word = nn.Embedding(V, H)
        self.pos = nn.Embedding(S, H)
        self.tok_type = nn.Embedding(2, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(H, A, I, dropout=0.1, activation="gelu", batch_first=True,
                                           layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.pooler = nn.Linear(H, H)
        self.transform = nn.Linear(H, H)
        self.transform_ln = nn.LayerNorm(H, eps=1e-12)
        self.output_bias = nn.Parameter(torch.zeros(V))
        self.nsp = nn.Linear(H, 2)
        # BERT's initialisation, as est's and bench/bert_torch.py's: truncated normal, std 0.02
        # (modeling.py create_initializer), zero biases. torch's defaults (N(0, 1) embeddings)
        # give logits of std ~sqrt(H) against the tied table, whose softmax gradients are
        # mostly denormal floats: at Small that made the step's matmuls ~5x slower.
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(mod.weight, std=0.02, a=-0.04, b=0.04)
            if isinstance(mod, nn.Linear) and mod.bias is not None:
                nn.init.zeros_(mod.bias)

    def forward(self, ids, mask, segs, positions, lm_ids, lm_w, ns):
        B, S = ids.shape
        x = self.word(ids) + self.tok_type(segs) + self.pos.weight[:S].unsqueeze(0)
        x = self.drop(self.ln(x))
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        g = x.gather(1, positions.unsqueeze(-1).expand(-1, -1, x.shape[-1])).reshape(-1, x.shape[-1])
        g = self.transform_ln(F.gelu(self.transform(g), approximate="tanh"))
        logits = g @ self.word.weight.t() + self.output_bias
        per = F.cross_entropy(logits, lm_ids.reshape(-1), reduction="none")
        w = lm_w.reshape(-1)
        lm_loss = (w * per).sum() / (w.sum() + 1e-5)
        return lm_loss + F.cross_entropy(self.nsp(pooled), ns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--pred", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    L, H, A, I = MODELS[a.model]
    m = Pretrainer(L, H, A, I, a.seq)
    decay = [p for n, p in m.named_parameters() if "bias" not in n and "ln" not in n and "norm" not in n]
    rest = [p for n, p in m.named_parameters() if not any(p is q for q in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-4, eps=1e-6)
    B, S, P = a.batch, a.seq, a.pred
    ids = torch.randint(0, V, (B, S))
    mask = torch.ones(B, S, dtype=torch.long)
    mask[:, S * 3 // 4:] = 0
    segs = torch.zeros(B, S, dtype=torch.long)
    segs[:, S // 2:] = 1
    positions = torch.randint(1, S * 3 // 4, (B, P))
    lm_ids = torch.randint(0, V, (B, P))
    lm_w = torch.ones(B, P)
    ns = torch.randint(0, 2, (B,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = m(ids, mask, segs, positions, lm_ids, lm_w, ns)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    print("steps/s %.4f ex/s %.2f" % (a.steps / dt, a.steps * B / dt))


if __name__ == "__main__":
    main()
