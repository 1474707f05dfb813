#!/usr/bin/env python3
"""The PyTorch peer of `est run_classifier` for bench/run_classifier_*.sh.

The same recipe as google-research/bert run_classifier.py, written for PyTorch so the
benchmark compares like with like, end to end (tokenising the TSVs, training, evaluating,
predicting, writing eval_results.txt / test_results.tsv):
  - FullTokenizer (BasicTokenizer + greedy WordPiece, max 200 chars per word);
  - convert_single_example: [CLS] a [SEP] (b [SEP]), _truncate_seq_pair, zero padding;
  - BertModel: post-LN encoder, tanh-approximate GELU, LayerNorm eps 1e-12, additive
    -10000 attention mask, tanh pooler, dropout 0.1, truncated-normal(0.02) init;
  - classifier head output_weights [C, H] with dropout 0.1 on the pooled output;
  - AdamWeightDecay without bias correction (eps 1e-6, decay 0.01 except LayerNorm/bias),
    global-norm clipping at 1.0, linear warmup then linear decay, lr 0 at step 0;
  - training input: repeat -> shuffle(buffer 100) -> batch(drop_remainder), max_steps =
    int(n / batch * epochs); eval/predict in file order, last batch kept.
Only python3, numpy and torch are needed. Not used by `make test`.
"""
import argparse
import collections
import math
import os
import random
import sys
import time
import unicodedata

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- tokenization

def load_vocab(path):
    vocab = collections.OrderedDict()
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.strip()] = i
    return vocab


def _is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def _is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class FullTokenizer:
    def __init__(self, vocab_file, do_lower_case=True):
        self.vocab = load_vocab(vocab_file)
        self.lower = do_lower_case

    def _basic(self, text):
        out = []
        for c in text:
            cp = ord(c)
            if cp == 0 or cp == 0xFFFD or _is_control(c):
                continue
            if _is_whitespace(c):
                out.append(" ")
            elif _is_cjk(cp):
                out.append(" " + c + " ")
            else:
                out.append(c)
        tokens = []
        for tok in "".join(out).split():
            if self.lower:
                tok = "".join(ch for ch in unicodedata.normalize("NFD", tok.lower())
                              if unicodedata.category(ch) != "Mn")
            cur = []
            for ch in tok:
                if _is_punctuation(ch):
                    if cur:
                        tokens.append("".join(cur))
                        cur = []
                    tokens.append(ch)
                else:
                    cur.append(ch)
            if cur:
                tokens.append("".join(cur))
        return tokens

    def _wordpiece(self, word):
        if len(word) > 200:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end, cur = len(word), None
            while start < end:
                sub = word[start:end]
                if start > 0:
                    sub = "##" + sub
                if sub in self.vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                return ["[UNK]"]
            pieces.append(cur)
            start = end
        return pieces

    def tokenize(self, text):
        return [p for w in self._basic(text) for p in self._wordpiece(w)]


# ---------------------------------------------------------------- processors

def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


def get_examples(task, data_dir, split):
    """(text_a, text_b, label) triples, as run_classifier.py's processors make them."""
    if task == "mrpc":
        rows = read_tsv(os.path.join(data_dir, split + ".tsv"))[1:]
        return [(r[3], r[4], "0" if split == "test" else r[0]) for r in rows], ["0", "1"]
    if task in ("sst-2", "sst2"):
        rows = read_tsv(os.path.join(data_dir, split + ".tsv"))[1:]
        if split == "test":
            return [(r[1], None, "0") for r in rows], ["0", "1"]
        return [(r[0], None, r[1]) for r in rows], ["0", "1"]
    if task == "cola":
        rows = read_tsv(os.path.join(data_dir, split + ".tsv"))
        if split == "test":
            return [(r[1], None, "0") for r in rows[1:]], ["0", "1"]
        return [(r[3], None, r[1]) for r in rows], ["0", "1"]
    raise ValueError("Task not found: %s" % task)


def convert(examples, labels, seq, tok):
    label_map = {l: i for i, l in enumerate(labels)}
    n = len(examples)
    ids = np.zeros((n, seq), np.int64)
    mask = np.zeros((n, seq), np.int64)
    seg = np.zeros((n, seq), np.int64)
    lab = np.zeros((n,), np.int64)
    cls_id, sep_id = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
    for i, (a, b, l) in enumerate(examples):
        ta = tok.tokenize(a)
        tb = tok.tokenize(b) if b else []
        if tb:
            while len(ta) + len(tb) > seq - 3:
                if len(ta) > len(tb):
                    ta.pop()
                else:
                    tb.pop()
        else:
            ta = ta[:seq - 2]
        toks = [cls_id] + [tok.vocab[t] for t in ta] + [sep_id]
        segs = [0] * len(toks)
        if tb:
            toks += [tok.vocab[t] for t in tb] + [sep_id]
            segs += [1] * (len(tb) + 1)
        ids[i, :len(toks)] = toks
        mask[i, :len(toks)] = 1
        seg[i, :len(segs)] = segs
        lab[i] = label_map[l]
    return ids, mask, seg, lab


# ---------------------------------------------------------------- model

def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def trunc_normal_(t, std):
    # TF1 truncated_normal: N(0, std^2) redrawn outside +-2 std, std not rescaled.
    return nn.init.trunc_normal_(t, std=std, a=-2.0 * std, b=2.0 * std)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.nh = c["num_attention_heads"]
        self.q, self.k, self.v = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.ao = nn.Linear(h, h)
        self.ln1 = nn.LayerNorm(h, eps=1e-12)
        self.inter = nn.Linear(h, i)
        self.out = nn.Linear(i, h)
        self.ln2 = nn.LayerNorm(h, eps=1e-12)
        self.hp = c["hidden_dropout_prob"]
        self.ap = c["attention_probs_dropout_prob"]

    def forward(self, x, add_mask):
        B, S, H = x.shape
        dh = H // self.nh

        def heads(t):
            return t.view(B, S, self.nh, dh).transpose(1, 2)
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(dh)) + add_mask
        probs = F.dropout(torch.softmax(scores, -1), self.ap, self.training)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(B, S, H)
        a = self.ln1(F.dropout(self.ao(ctx), self.hp, self.training) + x)
        return self.ln2(F.dropout(self.out(gelu(self.inter(a))), self.hp, self.training) + a)


class BertClassifier(nn.Module):
    def __init__(self, c, num_labels):
        super().__init__()
        h = c["hidden_size"]
        self.word = nn.Embedding(c["vocab_size"], h)
        self.pos = nn.Embedding(c["max_position_embeddings"], h)
        self.typ = nn.Embedding(c["type_vocab_size"], h)
        self.ln = nn.LayerNorm(h, eps=1e-12)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.pool = nn.Linear(h, h)
        self.output_weights = nn.Parameter(torch.empty(num_labels, h))
        self.output_bias = nn.Parameter(torch.zeros(num_labels))
        self.hp = c["hidden_dropout_prob"]
        # Kernels and tables: truncated normal(initializer_range); the head's 0.02 is
        # hard-coded in the reference. Biases 0, LayerNorm gamma 1 / beta 0.
        for name, p in self.named_parameters():
            if name == "output_weights":
                trunc_normal_(p, 0.02)
            elif name.endswith("weight") and "ln" not in name:
                trunc_normal_(p, c["initializer_range"])
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids, mask, seg):
        S = ids.shape[1]
        x = self.word(ids) + self.typ(seg) + self.pos.weight[:S].unsqueeze(0)
        x = F.dropout(self.ln(x), self.hp, self.training)
        add_mask = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, add_mask)
        pooled = torch.tanh(self.pool(x[:, 0]))
        pooled = F.dropout(pooled, 0.1, self.training)
        return pooled @ self.output_weights.t() + self.output_bias


class AdamWeightDecay(torch.optim.Optimizer):
    """BERT's optimizer: no bias correction, eps outside the sqrt, decoupled decay."""

    def __init__(self, named_params, lr, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
        groups = [{"params": [p for n, p in named_params if not ("bias" in n or "ln" in n)], "wd": wd},
                  {"params": [p for n, p in named_params if ("bias" in n or "ln" in n)], "wd": 0.0}]
        super().__init__(groups, dict(lr=lr, b1=b1, b2=b2, eps=eps))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                m, v = st["m"], st["v"]
                m.mul_(g["b1"]).add_(p.grad, alpha=1 - g["b1"])
                v.mul_(g["b2"]).addcmul_(p.grad, p.grad, value=1 - g["b2"])
                u = m / (v.sqrt() + g["eps"])
                if g["wd"]:
                    u.add_(p, alpha=g["wd"])
                p.add_(u, alpha=-g["lr"])


def lr_at(step, init_lr, total, warmup):
    decayed = init_lr * (1.0 - min(step, total) / total)
    if warmup and step < warmup:
        return init_lr * step / warmup
    return decayed


def train_batches(n, batch, seed):
    """repeat -> shuffle(buffer 100) -> batch(drop_remainder): indices, forever."""
    rng = random.Random(seed)
    buf = []
    stream = (i for _ in iter(int, 1) for i in range(n))
    while True:
        while len(buf) < 100:
            buf.append(next(stream))
        out = []
        for _ in range(batch):
            j = rng.randrange(len(buf))
            out.append(buf[j])
            buf[j] = next(stream)
        yield out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task_name", required=True)
    ap.add_argument("--data_dir", required=True)
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--bert_config_file", required=True)
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--do_train", action="store_true")
    ap.add_argument("--do_eval", action="store_true")
    ap.add_argument("--do_predict", action="store_true")
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--train_batch_size", type=int, default=32)
    ap.add_argument("--eval_batch_size", type=int, default=8)
    ap.add_argument("--learning_rate", type=float, default=5e-5)
    ap.add_argument("--num_train_epochs", type=float, default=3.0)
    ap.add_argument("--warmup_proportion", type=float, default=0.1)
    ap.add_argument("--num_threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--log_step_count_steps", type=int, default=100)
    a = ap.parse_args()
    t_start = time.time()
    if a.num_threads:
        torch.set_num_threads(a.num_threads)
    torch.manual_seed(a.seed)
    import json
    with open(a.bert_config_file) as f:
        cfg = json.load(f)
    os.makedirs(a.output_dir, exist_ok=True)
    task = a.task_name.lower()
    tok = FullTokenizer(a.vocab_file, True)
    _, labels = get_examples(task, a.data_dir, "dev")
    model = BertClassifier(cfg, len(labels))
    S = a.max_seq_length
    timings = {}

    if a.do_train:
        t0 = time.time()
        ex, _ = get_examples(task, a.data_dir, "train")
        ids, mask, seg, lab = (torch.from_numpy(t) for t in convert(ex, labels, S, tok))
        timings["train_features"] = time.time() - t0
        steps = int(len(ex) / a.train_batch_size * a.num_train_epochs)
        warm = int(steps * a.warmup_proportion)
        print("train: %d examples, %d steps, %d warmup, %d threads" % (len(ex), steps, warm,
              torch.get_num_threads()), flush=True)
        opt = AdamWeightDecay(list(model.named_parameters()), a.learning_rate)
        model.train()
        t0 = time.time()
        batches = train_batches(len(ex), a.train_batch_size, a.seed)
        for step in range(steps):
            idx = torch.tensor(next(batches))
            logits = model(ids[idx], mask[idx], seg[idx])
            loss = F.cross_entropy(logits, lab[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, a.learning_rate, steps, warm)
            opt.step()
            if (step + 1) % a.log_step_count_steps == 0 or step + 1 == steps:
                el = time.time() - t0
                print("step %d/%d loss = %.4f, %.1f examples/sec" % (
                    step + 1, steps, loss.item(), (step + 1) * a.train_batch_size / el), flush=True)
        timings["train"] = time.time() - t0

    model.eval()

    def run_eval_or_predict(split):
        ex, _ = get_examples(task, a.data_dir, split)
        ids, mask, seg, lab = (torch.from_numpy(t) for t in convert(ex, labels, S, tok))
        probs, losses, batch_losses = [], [], []
        with torch.no_grad():
            for s in range(0, len(ex), a.eval_batch_size):
                lg = model(ids[s:s + a.eval_batch_size], mask[s:s + a.eval_batch_size],
                           seg[s:s + a.eval_batch_size])
                pe = F.cross_entropy(lg, lab[s:s + a.eval_batch_size], reduction="none")
                losses.append(pe)
                batch_losses.append(pe.mean().item())
                probs.append(torch.softmax(lg, -1))
        return torch.cat(probs), torch.cat(losses), lab, batch_losses

    results = {}
    if a.do_eval:
        t0 = time.time()
        probs, losses, lab, bl = run_eval_or_predict("dev")
        pred = probs.argmax(-1)
        results = {"eval_accuracy": float((pred == lab).float().mean()),
                   "eval_loss": float(losses.mean()), "loss": float(np.mean(bl))}
        timings["eval"] = time.time() - t0
        with open(os.path.join(a.output_dir, "eval_results.txt"), "w") as f:
            for k in sorted(results):
                f.write("%s = %s\n" % (k, str(np.float32(results[k]))))
        print("eval_accuracy = %s" % str(np.float32(results["eval_accuracy"])), flush=True)
    if a.do_predict:
        t0 = time.time()
        probs, _, _, _ = run_eval_or_predict("test")
        with open(os.path.join(a.output_dir, "test_results.tsv"), "w") as f:
            for row in probs.numpy():
                f.write("\t".join(str(np.float32(x)) for x in row) + "\n")
        timings["predict"] = time.time() - t0
    timings["total"] = time.time() - t_start
    print("timings: " + " ".join("%s=%.2fs" % kv for kv in timings.items()), flush=True)


if __name__ == "__main__":
    main()
