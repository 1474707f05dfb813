"""PyTorch 2.x peer of bench/bench_bert.c at its best CPU settings: the same BERT classifier.

  torch2_bert.py --model tiny|mini|small|base [--mode train|infer] [--precision fp32|bf16]
                 [--compile 0|1] [--freeze 0|1] [--attn sdpa|matmul] [--batch 32] [--seq 128]
                 [--iters N] [--warmup W] [--threads 2]

The model, its initialisation and BERT's AdamWeightDecay (+ global-norm clip 1.0) are imported
from bench/bert_torch.py (the Debian PyTorch 1.13 peer), so the two PyTorch rows run the same
module tree with the same parameters: post-LN BERT, tanh GELU (as est), dropout 0.1 on the
hidden states, the attention probabilities and the classifier input in training. What torch 2
adds, each a switch:
  --attn sdpa    attention through F.scaled_dot_product_attention (torch 2's fused CPU kernel,
                 what HF transformers uses by default), same additive mask, same dropout 0.1 on
                 the probabilities; --attn matmul keeps bert_torch.py's explicit form.
  --compile 1    torch.compile (inductor) on the model: forward, and in training the backward
                 through AOTAutograd. The optimizer step stays eager (its learning rate changes
                 every step, which would recompile a compiled step; it is torch._foreach_* ops).
  --freeze 1     (inference with --compile 1; the default there) inductor's freezing
                 (torch._inductor.config.freezing, TORCHINDUCTOR_FREEZING=1 in PyTorch's CPU
                 inference recipes): the weights become constants, so linear layers are
                 prepacked once into oneDNN's blocked layout (bf16 too) and constant folded;
                 the forward then runs under torch.no_grad() (freezing needs it).
  --precision bf16   torch.autocast("cpu", bfloat16) around the forward and the loss: matmuls
                 in bf16 via oneDNN, master weights, gradients and optimizer state in fp32.
Training step = zero grads, forward, cross entropy, backward, clip + AdamWeightDecay.
Inference = forward in eval mode under torch.inference_mode().

Prints one line, field 4 the figure: "torch2 <model> <mode> <ex/s> ex/s (...)".
bench/run_peers.sh runs it (with tcmalloc preloaded when available) next to est.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bert_torch  # noqa: E402  (bench/bert_torch.py: BertClassifier, Layer, AdamWeightDecay)


def sdpa_layer_forward(self, x, additive):
    """bert_torch.Layer.forward with the attention core as one fused SDPA call."""
    B, S, H = x.shape
    N, Dh = self.N, H // self.N

    def heads(t):
        return t.view(B, S, N, Dh).transpose(1, 2)

    q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
    # scale defaults to 1/sqrt(Dh); additive [B, 1, 1, S] broadcasts over heads and queries
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=additive,
                                         dropout_p=self.p if self.training else 0.0)
    ctx = ctx.transpose(1, 2).reshape(B, S, H)
    a = self.ln1(F.dropout(self.ao(ctx), self.p, self.training) + x)
    h = F.gelu(self.i(a), approximate="tanh")
    return self.ln2(F.dropout(self.o(h), self.p, self.training) + a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny", choices=sorted(bert_torch.MODELS))
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--compile", type=int, default=0, choices=[0, 1])
    ap.add_argument("--freeze", type=int, default=1, choices=[0, 1])
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "matmul"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0, help="default 1, 2 with --compile 1")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.attn == "sdpa":
        bert_torch.Layer.forward = sdpa_layer_forward
    L, H = bert_torch.MODELS[a.model]
    train = a.mode == "train"
    iters = a.iters or ((3 if train else 6) if a.model == "base" else (20 if train else 50))
    # a compiled module compiles on its first call and, in training, again when autograd first
    # runs the compiled backward: two untimed steps
    warmup = a.warmup or (2 if a.compile else 1)
    model = bert_torch.BertClassifier(L, H)
    B, S = a.batch, a.seq
    ids = torch.randint(0, 30522, (B, S))
    mask = torch.ones(B, S, dtype=torch.long)
    segs = (torch.arange(S) >= S // 2).long().expand(B, S).contiguous()
    labels = torch.arange(B) % 2
    loss = torch.tensor(0.0)
    if train:
        model.train()
        opt = bert_torch.AdamWeightDecay(list(model.named_parameters()))
    else:
        model.eval()
    freeze = bool(a.compile and a.freeze and not train)
    if freeze:
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
    fwd = torch.compile(model) if a.compile else model
    # inference: inference_mode, or no_grad when frozen (freezing needs grad mode off, and
    # inference tensors cannot be captured as constants)
    nograd = torch.no_grad if freeze else torch.inference_mode
    amp = a.precision == "bf16"
    t0 = None
    for it in range(warmup + iters):
        if it == warmup:
            t0 = time.perf_counter()
        if train:
            for p in model.parameters():
                p.grad = None
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                logits = fwd(ids, mask, segs)
                loss = F.cross_entropy(logits.float(), labels)
            loss.backward()
            opt.step(it)
        else:
            with nograd(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                fwd(ids, mask, segs)
    dt = time.perf_counter() - t0
    print("torch2 %s %s %.2f ex/s (%.1f ms/step, %d iters, %s, %s, %s, torch %s, loss %.4f)" %
          (a.model, a.mode, B * iters / dt, 1e3 * dt / iters, iters, a.precision,
           ("compile+freeze" if freeze else "compile") if a.compile else "eager", a.attn,
           torch.__version__, loss.item()))


if __name__ == "__main__":
    main()
