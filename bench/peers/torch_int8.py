"""PyTorch dynamic-quantization peer of `bench_bert --precision int8` (inference only).

  torch_int8.py --model M [--batch 32] [--seq 128] [--iters N] [--warmup W] [--threads 2]

bench/bert_torch.py's BertClassifier (torch.manual_seed(0), eval mode, the model every PyTorch
and ONNX Runtime row of bench/run_peers.sh uses) through
torch.ao.quantization.quantize_dynamic({nn.Linear}, dtype=torch.qint8): every Linear's
weights int8 per tensor, activations quantized per batch at run time (fbgemm on x86);
attention's two batched matmuls, LayerNorm, GELU and softmax stay fp32. Times the forward
under torch.inference_mode() on ort_bert.py's inputs (the benchmark's ids, mask, segments).
Prints one line, field 4 the figure: "torch-int8 <model> infer <ex/s> ex/s (...)".
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import bert_torch  # noqa: E402
import ort_bert  # noqa: E402  (inputs() and MODELS; imports numpy only)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="base", choices=sorted(ort_bert.MODELS))
    ort_bert.add_timing_args(ap)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    L, H = ort_bert.MODELS[a.model]
    torch.manual_seed(0)
    model = bert_torch.BertClassifier(L, H).eval()
    qmodel = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    feeds = ort_bert.inputs(a.batch, a.seq)
    args = tuple(torch.from_numpy(feeds[k]) for k in ("input_ids", "input_mask", "segment_ids"))
    iters = a.iters or (6 if a.model == "base" else 50)
    with torch.inference_mode():
        for it in range(a.warmup + iters):
            if it == a.warmup:
                t0 = time.perf_counter()
            qmodel(*args)
        dt = time.perf_counter() - t0
    print("torch-int8 %s infer %.2f ex/s (%.1f ms/step, %d iters, torch %s, engine %s)" %
          (a.model, a.batch * iters / dt, 1e3 * dt / iters, iters, torch.__version__,
           torch.backends.quantized.engine))


if __name__ == "__main__":
    main()
