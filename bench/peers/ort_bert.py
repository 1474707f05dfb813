"""ONNX Runtime peer of bench/bench_bert.c (inference only).

  ort_bert.py export --model M --out DIR [--batch 32] [--seq 128]
      builds bench/bert_torch.py's BertClassifier (torch.manual_seed(0), eval mode), copies its
      parameters into HF transformers' BertForSequenceClassification of the same shape (eager
      attention, tanh GELU "gelu_new", LayerNorm eps 1e-12) and checks the two give the same
      logits, exports the HF model with torch.onnx.export (opset 17, dynamic batch and sequence
      axes), runs ONNX Runtime's transformer optimizer on it
      (onnxruntime.transformers.optimizer.optimize_model, model_type="bert", num_heads=H/64,
      hidden_size=H), writes DIR/bert_<M>.onnx and DIR/bert_<M>.json (the fused-operator
      counts), and checks that the optimized graph's logits match PyTorch's on the benchmark's
      inputs. Why HF's module tree: the optimizer's Attention and EmbedLayerNormalization
      patterns are written against HF BERT's exported graph (the Q/K/V projections, the
      1/sqrt(Dh) Div, the (1 - mask) * min mask subgraph, position ids through a Gather); with
      bert_torch.py's own tree (scores * scale, pos.weight[:S] sliced) they did not match and
      attention ran unfused (bench/README.md). --graph bert_torch exports that tree instead.
  ort_bert.py run --model M --dir DIR [--iters N] [--warmup W] [--threads 2]
      times InferenceSession.run (CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads
      = threads, sequential) on the same inputs as bench_bert: batch 32 x seq 128 random ids,
      full mask, two segments. Imports only onnxruntime and numpy, so the process's peak RSS
      is what a user's ONNX Runtime server holds, not torch's.

Export is not timed; bench/run_peers.sh runs it once per model before taking the bench lock.
Prints one line, field 4 the figure: "ort <model> infer <ex/s> ex/s (...)".
"""
import argparse
import json
import os
import sys
import time

import numpy as np

MODELS = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "base": (12, 768)}


def inputs(batch, seq):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 30522, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    segs = np.broadcast_to((np.arange(seq) >= seq // 2).astype(np.int64), (batch, seq)).copy()
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segs}


def hf_classifier(model, L, H):
    """HF BertForSequenceClassification holding bert_torch.BertClassifier `model`'s parameters,
    called as model(ids, mask, segs) -> logits."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(vocab_size=30522, hidden_size=H, num_hidden_layers=L,
                     num_attention_heads=H // 64, intermediate_size=4 * H, hidden_act="gelu_new",
                     max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12,
                     num_labels=2, attn_implementation="eager")
    hf = BertForSequenceClassification(cfg).eval()
    names = {"word": "bert.embeddings.word_embeddings", "pos": "bert.embeddings.position_embeddings",
             "segment": "bert.embeddings.token_type_embeddings", "ln": "bert.embeddings.LayerNorm",
             "pool": "bert.pooler.dense", "out": "classifier"}
    per_layer = {"q": "attention.self.query", "k": "attention.self.key",
                 "v": "attention.self.value", "ao": "attention.output.dense",
                 "ln1": "attention.output.LayerNorm", "i": "intermediate.dense",
                 "o": "output.dense", "ln2": "output.LayerNorm"}
    state = {}
    for k, v in model.state_dict().items():
        parts = k.split(".")
        if parts[0] == "layers":
            hk = "bert.encoder.layer.%s.%s.%s" % (parts[1], per_layer[parts[2]], parts[3])
        else:
            hk = "%s.%s" % (names[parts[0]], parts[1])
        state[hk] = v
    missing, unexpected = hf.load_state_dict(state, strict=False)
    # position_ids / token_type_ids are HF's constant buffers, not parameters
    if unexpected or [m for m in missing if not m.endswith("_ids")]:
        sys.exit("ort_bert: parameter map incomplete: missing %s unexpected %s" % (missing, unexpected))

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = hf

        def forward(self, ids, mask, segs):
            return self.hf(input_ids=ids, attention_mask=mask, token_type_ids=segs).logits

    return Wrap().eval()


def export(a):
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import bert_torch

    L, H = MODELS[a.model]
    torch.manual_seed(0)
    model = bert_torch.BertClassifier(L, H).eval()
    feeds = inputs(a.batch, a.seq)
    args = tuple(torch.from_numpy(feeds[k]) for k in ("input_ids", "input_mask", "segment_ids"))
    with torch.inference_mode():
        want = model(*args).numpy()
    graph = model
    if a.graph == "hf":
        graph = hf_classifier(model, L, H)
        with torch.inference_mode():
            d = float(np.max(np.abs(graph(*args).numpy() - want)))
        # the same parameters and operations; only the mask constant (-10000 vs float min,
        # both vanish under a full mask) and summation order differ
        if not d < 1e-5:
            sys.exit("ort_bert: HF model's logits differ from bert_torch.py's by %g" % d)
    os.makedirs(a.out, exist_ok=True)
    raw = os.path.join(a.out, "bert_%s.raw.onnx" % a.model)
    dyn = {k: {0: "batch", 1: "seq"} for k in feeds}
    dyn["logits"] = {0: "batch"}
    torch.onnx.export(graph, args, raw, input_names=list(feeds), output_names=["logits"],
                      dynamic_axes=dyn, opset_version=17, do_constant_folding=True)
    opt = optimize_model(raw, model_type="bert", num_heads=H // 64, hidden_size=H)
    path = os.path.join(a.out, "bert_%s.onnx" % a.model)
    tmp = path + ".tmp"
    opt.save_model_to_file(tmp)
    os.replace(tmp, path)
    os.remove(raw)
    stats = opt.get_fused_operator_statistics()

    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)[0]
    diff = float(np.max(np.abs(got - want)))
    info = {"model": a.model, "graph": a.graph, "torch": torch.__version__,
            "onnxruntime": ort.__version__, "fused": {k: v for k, v in stats.items() if v},
            "max_abs_logit_diff": diff}
    with open(os.path.join(a.out, "bert_%s.json" % a.model), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))
    # fp32 throughout: the fused kernels reorder sums, nothing more
    if not diff < 1e-4:
        sys.exit("ort_bert: optimized graph's logits differ from PyTorch's by %g" % diff)


def run(a):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    path = os.path.join(a.dir, "bert_%s.onnx" % a.model)
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = inputs(a.batch, a.seq)
    iters = a.iters or (6 if a.model == "base" else 50)
    t0 = None
    for it in range(a.warmup + iters):
        if it == a.warmup:
            t0 = time.perf_counter()
        sess.run(None, feeds)
    dt = time.perf_counter() - t0
    print("ort %s infer %.2f ex/s (%.1f ms/step, %d iters, onnxruntime %s)" %
          (a.model, a.batch * iters / dt, 1e3 * dt / iters, iters, ort.__version__))


def add_timing_args(ap):
    """The shape and timing flags every bench_bert peer takes (bench/peers/torch_int8.py too)."""
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["export", "run"])
    ap.add_argument("--model", default="tiny", choices=sorted(MODELS))
    ap.add_argument("--out", default="")
    ap.add_argument("--graph", default="hf", choices=["hf", "bert_torch"])
    ap.add_argument("--dir", default="")
    add_timing_args(ap)
    a = ap.parse_args()
    export(a) if a.cmd == "export" else run(a)


if __name__ == "__main__":
    main()
