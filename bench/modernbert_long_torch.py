"""PyTorch's side of bench/README.md's "Long inputs" table: ModernBertModel with
attn_implementation="sdpa" (scaled_dot_product_attention) on one sequence of S tokens, fp32,
no grad, in a process of its own per S so that ru_maxrss is that run's peak.

    /tmp/venv-modern/bin/python bench/modernbert_long_torch.py DIR S THREADS

DIR: a ModernBERT directory (bench/README.md makes a random ModernBERT-base-shaped one);
prints S, seconds of the forward (after one warm-up at S), ms per token and peak RSS (MiB).
transformers 4.48.3, torch 2.4.1 (the venv of tests/reference/modernbert_golden.py).
"""
import resource
import sys
import time

import torch
from transformers import ModernBertModel

d, S, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
m = ModernBertModel.from_pretrained(d, attn_implementation="sdpa", reference_compile=False).eval()
g = torch.Generator().manual_seed(1)
ids = torch.randint(5, 40, (1, S), generator=g)
ids[0, 0] = 2
mask = torch.ones(1, S, dtype=torch.long)
with torch.no_grad():
    m(input_ids=ids, attention_mask=mask)
    t = time.perf_counter()
    m(input_ids=ids, attention_mask=mask)
    dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("torch sdpa S=%d: %.2f s, %.3f ms/token, peak RSS %.0f MiB" % (S, dt, 1000 * dt / S, rss))
