#!/usr/bin/python3
"""The Python peer of `est serve` in bench/serve_bench.sh: the same exported classifier served
the way a Python user would, PyTorch behind FastAPI + uvicorn (Debian's python3-torch,
python3-fastapi, python3-uvicorn), with the same request and answer JSON as TF Serving's
:predict. Per request: the reference FullTokenizer (bench/run_classifier_torch.py), features
padded to the request's longest example (a good user's dynamic padding, not max_seq_length),
one forward under torch.inference_mode(), softmax.

  EST_EXPORT=<version dir> EST_WEIGHTS=<safetensors of its variables> TORCH_THREADS=2 \
      python3 -m uvicorn serve_torch:app --app-dir bench --host 127.0.0.1 --port 8502
The safetensors file is `est ckpt convert <version>/variables/variables OUT.safetensors`.
"""
import json
import os
import struct

import torch
from fastapi import FastAPI, HTTPException, Request

from run_classifier_torch import BertClassifier, FullTokenizer

EXPORT = os.environ["EST_EXPORT"]
META = json.load(open(os.path.join(EXPORT, "est_model.json")))
CFG, LABELS, SEQ = META["bert_config"], META["labels"], META["max_seq_length"]
torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(info["shape"])
    return out


def load_model():
    w = read_safetensors(os.environ["EST_WEIGHTS"])
    m = BertClassifier(CFG, len(LABELS))
    sd = {"word.weight": w["bert/embeddings/word_embeddings"], "pos.weight": w["bert/embeddings/position_embeddings"],
          "typ.weight": w["bert/embeddings/token_type_embeddings"], "ln.weight": w["bert/embeddings/LayerNorm/gamma"],
          "ln.bias": w["bert/embeddings/LayerNorm/beta"], "pool.weight": w["bert/pooler/dense/kernel"].t(),
          "pool.bias": w["bert/pooler/dense/bias"], "output_weights": w["output_weights"],
          "output_bias": w["output_bias"]}
    names = {"q": "attention/self/query", "k": "attention/self/key", "v": "attention/self/value",
             "ao": "attention/output/dense", "inter": "intermediate/dense", "out": "output/dense"}
    for l in range(CFG["num_hidden_layers"]):
        p = "bert/encoder/layer_%d/" % l
        for mod, tf in names.items():
            sd["layers.%d.%s.weight" % (l, mod)] = w[p + tf + "/kernel"].t()
            sd["layers.%d.%s.bias" % (l, mod)] = w[p + tf + "/bias"]
        for mod, tf in (("ln1", "attention/output/LayerNorm"), ("ln2", "output/LayerNorm")):
            sd["layers.%d.%s.weight" % (l, mod)] = w[p + tf + "/gamma"]
            sd["layers.%d.%s.bias" % (l, mod)] = w[p + tf + "/beta"]
    m.load_state_dict(sd)
    return m.eval()


MODEL = load_model()
TOK = FullTokenizer(os.path.join(EXPORT, "assets/vocab.txt"), META["do_lower_case"])
app = FastAPI()


def features(texts):
    rows = []
    for a, b in texts:
        ta, tb = TOK.tokenize(a), TOK.tokenize(b) if b else []
        if tb:
            while len(ta) + len(tb) > SEQ - 3:
                (ta if len(ta) > len(tb) else tb).pop()
        else:
            ta = ta[:SEQ - 2]
        ids = [TOK.vocab["[CLS]"]] + [TOK.vocab[t] for t in ta] + [TOK.vocab["[SEP]"]]
        segs = [0] * len(ids)
        if tb:
            ids += [TOK.vocab[t] for t in tb] + [TOK.vocab["[SEP]"]]
            segs += [1] * (len(tb) + 1)
        rows.append((ids, segs))
    L = max(len(r[0]) for r in rows)
    ids = torch.zeros(len(rows), L, dtype=torch.long)
    mask = torch.zeros(len(rows), L, dtype=torch.long)
    segs = torch.zeros(len(rows), L, dtype=torch.long)
    for i, (r, s) in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
        segs[i, :len(s)] = torch.tensor(s)
    return ids, mask, segs


@app.post("/v1/models/bench:predict")
def predict(body: dict):
    inst = body.get("instances")
    if not isinstance(inst, list) or not inst:
        raise HTTPException(status_code=400, detail="needs instances")
    texts = [(x, None) if isinstance(x, str) else (x["text_a"], x.get("text_b")) for x in inst]
    ids, mask, segs = features(texts)
    with torch.inference_mode():
        probs = torch.softmax(MODEL(ids, mask, segs), -1)
    return {"predictions": probs.tolist()}
