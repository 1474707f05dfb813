#!/usr/bin/env python3
"""sentence-transformers' Pooling + Normalize, written out in plain Python (float64), on
seeded inputs: the golden tests/data/pooling/pooling_golden.txt for tests/test_pooling.c.

    python3 tests/reference/pooling_reference.py > tests/data/pooling/pooling_golden.txt

The formulas are sentence_transformers/models/Pooling.py's forward (v2.2 to v3.x):
  cls            token_embeddings[:, 0]
  max            token_embeddings[mask == 0] = -1e9; max over positions
  mean           sum(token_embeddings * mask) / clamp(sum(mask), min=1e-9)
  mean_sqrt_len  the same sum / sqrt(sum(mask))
concatenated in that order, and Normalize.py: F.normalize(x, p=2, dim=1), i.e.
x / max(||x||_2, 1e-12). Inputs are multiples of 1/64 in [-2, 2) so they are exact float32.
Output: "B S H", the sequence output [B*S*H], the mask [B*S], then per case a line
"modes normalize" and its [B*W] values (repr of a float64).
"""
import math

B, S, H = 3, 6, 5
MODES = ["cls", "max", "mean", "mean_sqrt_len"]
CASES = [(["cls"], 0), (["max"], 0), (["mean"], 0), (["mean_sqrt_len"], 0), (["mean"], 1), (["max"], 1),
         (["cls", "max", "mean", "mean_sqrt_len"], 0), (["cls", "mean"], 1)]


def lcg(seed):
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield x >> 33


def pool(seq, mask, modes, normalize):
    out = []
    for b in range(B):
        rows = [seq[b][t] for t in range(S)]
        m = mask[b]
        count = sum(m)
        vec = []
        if "cls" in modes:
            vec += rows[0]
        if "max" in modes:
            vec += [max(rows[t][h] if m[t] else -1e9 for t in range(S)) for h in range(H)]
        sums = [sum(rows[t][h] * m[t] for t in range(S)) for h in range(H)]
        if "mean" in modes:
            vec += [s / max(count, 1e-9) for s in sums]
        if "mean_sqrt_len" in modes:
            vec += [s / math.sqrt(count) for s in sums]
        if normalize:
            norm = max(math.sqrt(sum(v * v for v in vec)), 1e-12)
            vec = [v / norm for v in vec]
        out += vec
    return out


def main():
    g = lcg(20261206)
    seq = [[[(next(g) % 256 - 128) / 64.0 for _ in range(H)] for _ in range(S)] for _ in range(B)]
    lengths = [S, 3, 1]  # a full row, a padded one, [CLS] alone
    mask = [[1 if t < n else 0 for t in range(S)] for n in lengths]
    print(B, S, H)
    print(" ".join(repr(v) for b in seq for row in b for v in row))
    print(" ".join(str(v) for row in mask for v in row))
    for modes, normalize in CASES:
        print(",".join(modes), normalize)
        print(" ".join(repr(v) for v in pool(seq, mask, modes, normalize)))


if __name__ == "__main__":
    main()
