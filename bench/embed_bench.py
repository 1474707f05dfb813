#!/usr/bin/env python3
"""Sentence embeddings of all-MiniLM-L6-v2: est embed / est serve POST /embed against
PyTorch (transformers' BertModel + mean pooling + L2 normalisation, the computation
sentence-transformers' encode(normalize_embeddings=True) runs) and ONNX Runtime (the same
module exported with torch.onnx), on the same texts, same threads. One run each; ratios.

    python3 bench/embed_bench.py EST_BIN HF_DIR EST_MODEL_DIR TEXTS [N] [THREADS]

EST_MODEL_DIR is bench/embed_prepare.py's output (model.ckpt, bert_config.json, vocab.txt,
the sentence-transformers files). Needs torch, transformers, onnxruntime.
"""
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import torch
from transformers import BertModel, BertTokenizerFast

EST, HF, MODEL, TEXTS = sys.argv[1:5]
N = int(sys.argv[5]) if len(sys.argv) > 5 else 512
THREADS = int(sys.argv[6]) if len(sys.argv) > 6 else 2
S = 256
texts = [l.split("\t")[0] for l in open(TEXTS, encoding="utf-8").read().splitlines()[1:]][:N]
torch.set_num_threads(THREADS)
tok = BertTokenizerFast.from_pretrained(HF)
model = BertModel.from_pretrained(HF).eval()


class Pooled(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask, types):
        h = self.m(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        w = mask.unsqueeze(-1).to(h.dtype)
        return torch.nn.functional.normalize((h * w).sum(1) / w.sum(1).clamp(min=1e-9), dim=1)


pooled = Pooled(model).eval()


def batches(bs):
    """Texts sorted by length as sentence-transformers' encode sorts them."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for b0 in range(0, len(order), bs):
        yield [texts[i] for i in order[b0:b0 + bs]]


def run_torch(bs, lat=None):
    with torch.inference_mode():
        for b in batches(bs):
            t0 = time.perf_counter()
            e = tok(b, padding=True, truncation=True, max_length=S, return_tensors="pt")
            pooled(e["input_ids"], e["attention_mask"], e["token_type_ids"])
            if lat is not None:
                lat.append(time.perf_counter() - t0)


def onnx_session():
    import onnxruntime as ort
    path = os.path.join(tempfile.mkdtemp(), "minilm.onnx")
    e = tok(["a b"], return_tensors="pt")
    torch.onnx.export(pooled, (e["input_ids"], e["attention_mask"], e["token_type_ids"]), path,
                      input_names=["ids", "mask", "types"], output_names=["emb"], opset_version=17,
                      dynamic_axes={k: {0: "b", 1: "s"} for k in ["ids", "mask", "types"]})
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run_ort(sess, bs, lat=None):
    for b in batches(bs):
        t0 = time.perf_counter()
        e = tok(b, padding=True, truncation=True, max_length=S, return_tensors="np")
        sess.run(None, {"ids": e["input_ids"], "mask": e["attention_mask"], "types": e["token_type_ids"]})
        if lat is not None:
            lat.append(time.perf_counter() - t0)


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def est_embed(bs, lines):
    cmd = [EST, "embed", "--init_checkpoint=" + MODEL + "/model.ckpt", "--bert_config_file=" + MODEL +
           "/bert_config.json", "--vocab_file=" + MODEL + "/vocab.txt", "--max_seq_length=%d" % S,
           "--batch_size=%d" % bs, "--num_threads=%d" % THREADS, "--output_format=tsv"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t0, np.array([[float(x) for x in l.split("\t")] for l in out.splitlines()])


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def serve_latency(port, conns, per_conn):
    lat, lock = [], threading.Lock()

    def client(k):
        c = http.client.HTTPConnection("127.0.0.1", port)
        mine = []
        for i in range(per_conn):
            body = json.dumps({"inputs": texts[(k * per_conn + i) % len(texts)]})
            t0 = time.perf_counter()
            c.request("POST", "/embed", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
            mine.append(time.perf_counter() - t0)
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(k,)) for k in range(conns)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    wall = time.perf_counter() - t0
    return pct(lat, 50), pct(lat, 99), len(lat) / wall


def main():
    res = {}
    load, _ = est_embed(1, texts[:1])
    for bs in (1, 32):
        wall, est_vecs = est_embed(bs, texts)
        res["est embed b%d" % bs] = len(texts) / (wall - load)
        res["torch b%d" % bs] = len(texts) / timed(lambda: run_torch(bs))
    sess = onnx_session()
    for bs in (1, 32):
        res["onnxruntime b%d" % bs] = len(texts) / timed(lambda: run_ort(sess, bs))
    # agreement (est runs modeling.py's tanh GELU on a model trained with the erf one)
    with torch.inference_mode():
        e = tok(texts[:64], padding=True, truncation=True, max_length=S, return_tensors="pt")
        ref = pooled(e["input_ids"], e["attention_mask"], e["token_type_ids"]).numpy()
    _, mine = est_embed(32, texts[:64])
    print("max |est - torch| over 64 texts: %.2e" % np.abs(mine - ref).max())
    print("load of est embed (1 line): %.3f s (subtracted)" % load)
    for k in ("est embed", "torch", "onnxruntime"):
        print("%-12s sentences/s  batch 1: %8.1f   batch 32: %8.1f" % (k, res[k + " b1"], res[k + " b32"]))
    for bs in (1, 32):
        print("ratios at batch %d: est/torch %.2f, est/onnxruntime %.2f" % (
            bs, res["est embed b%d" % bs] / res["torch b%d" % bs], res["est embed b%d" % bs] / res["onnxruntime b%d" % bs]))
    lt, lo = [], []
    run_torch(1, lt)
    run_ort(sess, 1, lo)
    print("in-process batch-1 call latency (no HTTP): torch p50 %.2f ms p99 %.2f ms; onnxruntime p50 %.2f ms p99 %.2f ms"
          % (1e3 * pct(lt, 50), 1e3 * pct(lt, 99), 1e3 * pct(lo, 50), 1e3 * pct(lo, 99)))
    exp = tempfile.mkdtemp()
    subprocess.run([EST, "embed", "--init_checkpoint=" + MODEL + "/model.ckpt", "--bert_config_file=" + MODEL +
                    "/bert_config.json", "--vocab_file=" + MODEL + "/vocab.txt", "--max_seq_length=%d" % S,
                    "--export_dir=" + exp], check=True, capture_output=True)
    srv = subprocess.Popen([EST, "serve", "--model_base_path=" + exp, "--rest_api_port=0", "--enable_batching",
                            "--max_batch_size=32", "--num_threads=%d" % THREADS, "--max_enqueued_batches=64"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(srv.stdout.readline().rsplit(":", 1)[1])
    try:
        for conns in (1, 16):
            p50, p99, rps = serve_latency(port, conns, max(16, 256 // conns))
            print("est serve /embed, %2d connections: p50 %.2f ms, p99 %.2f ms, %.1f sentences/s"
                  % (conns, 1e3 * p50, 1e3 * p99, rps))
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
