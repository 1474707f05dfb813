#!/usr/bin/env python3
"""Reference output for est's extract_features test (developer tool; `make test` does not run it).

An independent, dependency-free transcription of what google-research/bert's extract_features.py
computes: read_examples (line.strip(), the "text_a ||| text_b" regex), FullTokenizer
(tests/reference/bert_tokenizer_ref.py), convert_examples_to_features ([CLS] a [SEP] (b [SEP]),
_truncate_seq_pair, zero padding), BertModel's forward in inference mode (modeling.py:
embeddings + LayerNorm(1e-12), per layer self-attention with the -10000 mask, dense,
residual + LayerNorm, tanh-GELU intermediate, dense, residual + LayerNorm) in float64,
and its JSON lines (json.dumps of OrderedDicts, values round(float(x), 6)).

The weights come from a safetensors file: convert the TF checkpoint first with
`est ckpt convert CKPT OUT.safetensors` (est's converter is checked byte for byte against
TF-written files by tests/test_ckpt*.c).

usage: python3 tests/reference/extract_features_ref.py WEIGHTS.safetensors bert_config.json \
           vocab.txt input.txt max_seq_length layers do_lower_case output.jsonl
e.g.   est ckpt convert tests/data/keras_bert_tiny/bert_model.ckpt /tmp/kbt.safetensors
       python3 tests/reference/extract_features_ref.py /tmp/kbt.safetensors \
           tests/data/keras_bert_tiny/bert_config.json tests/data/keras_bert_tiny/vocab.txt \
           tests/data/extract_features/input.txt 10 -1,-2,0 1 tests/data/extract_features/expected.jsonl
"""
import collections
import json
import math
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_tokenizer_ref import basic_tokenize, load_vocab, wordpiece  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        flat = list(struct.unpack("<%df" % ((b - a) // 4), data[base + a:base + b]))
        out[name] = (info["shape"], flat)
    return out


def matrix(w, name):
    shape, flat = w[name]
    rows, cols = shape
    return [flat[r * cols:(r + 1) * cols] for r in range(rows)]


def vector(w, name):
    return w[name][1]


def dense(x, kernel, bias):
    """x [n, in] @ kernel [in, out] + bias."""
    out = []
    for row in x:
        o = list(bias)
        for i, xi in enumerate(row):
            if xi:
                k = kernel[i]
                for j in range(len(o)):
                    o[j] += xi * k[j]
        out.append(o)
    return out


def layer_norm(x, gamma, beta, eps=1e-12):
    out = []
    for row in x:
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        inv = 1.0 / math.sqrt(var + eps)
        out.append([(v - mean) * inv * g + b for v, g, b in zip(row, gamma, beta)])
    return out


def gelu(v):
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


def encoder_layers(w, cfg, ids, mask, segs):
    """all_encoder_layers for one example: a list of [S, H] lists."""
    S, H = len(ids), cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    hd = H // heads
    we = matrix(w, "bert/embeddings/word_embeddings")
    te = matrix(w, "bert/embeddings/token_type_embeddings")
    pe = matrix(w, "bert/embeddings/position_embeddings")
    x = [[we[ids[t]][h] + te[segs[t]][h] + pe[t][h] for h in range(H)] for t in range(S)]
    x = layer_norm(x, vector(w, "bert/embeddings/LayerNorm/gamma"), vector(w, "bert/embeddings/LayerNorm/beta"))
    adder = [(1.0 - m) * -10000.0 for m in mask]
    layers = []
    for l in range(cfg["num_hidden_layers"]):
        p = "bert/encoder/layer_%d/" % l

        def lin(name, inp):
            return dense(inp, matrix(w, p + name + "/kernel"), vector(w, p + name + "/bias"))

        q, k, v = lin("attention/self/query", x), lin("attention/self/key", x), lin("attention/self/value", x)
        ctx = [[0.0] * H for _ in range(S)]
        for h in range(heads):
            lo = h * hd
            for i in range(S):
                scores = [sum(q[i][lo + d] * k[j][lo + d] for d in range(hd)) / math.sqrt(hd) + adder[j]
                          for j in range(S)]
                mx = max(scores)
                e = [math.exp(s - mx) for s in scores]
                z = sum(e)
                for j in range(S):
                    pj = e[j] / z
                    for d in range(hd):
                        ctx[i][lo + d] += pj * v[j][lo + d]
        att = lin("attention/output/dense", ctx)
        att = layer_norm([[a + b for a, b in zip(ra, rx)] for ra, rx in zip(att, x)],
                         vector(w, p + "attention/output/LayerNorm/gamma"),
                         vector(w, p + "attention/output/LayerNorm/beta"))
        inter = [[gelu(v) for v in row] for row in lin("intermediate/dense", att)]
        out = lin("output/dense", inter)
        x = layer_norm([[a + b for a, b in zip(ro, ra)] for ro, ra in zip(out, att)],
                       vector(w, p + "output/LayerNorm/gamma"), vector(w, p + "output/LayerNorm/beta"))
        layers.append(x)
    return layers


def tokenize(vocab, text, lower):
    out = []
    for tok in basic_tokenize(text, lower):
        out.extend(wordpiece(vocab, tok))
    return out


def main():
    weights_path, config_path, vocab_path, input_path, seq, layers, lower, output = sys.argv[1:9]
    seq, lower = int(seq), lower in ("1", "true", "True")
    layer_indexes = [int(x) for x in layers.split(",")]
    cfg = json.load(open(config_path))
    vocab = load_vocab(vocab_path)
    w = read_safetensors(weights_path)
    with open(input_path, encoding="utf-8") as f, open(output, "w", encoding="utf-8") as out:
        for unique_id, line in enumerate(f):
            line = line.strip()
            m = re.match(r"^(.*) \|\|\| (.*)$", line)
            text_a, text_b = (line, None) if m is None else (m.group(1), m.group(2))
            tokens_a = tokenize(vocab, text_a, lower)
            tokens_b = tokenize(vocab, text_b, lower) if text_b else None
            if tokens_b:
                while len(tokens_a) + len(tokens_b) > seq - 3:
                    (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
            else:
                tokens_a = tokens_a[:seq - 2]
            tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
            segs = [0] * len(tokens)
            if tokens_b:
                tokens += tokens_b + ["[SEP]"]
                segs += [1] * (len(tokens_b) + 1)
            ids = [vocab[t] for t in tokens]
            mask = [1] * len(ids)
            while len(ids) < seq:
                ids.append(0)
                mask.append(0)
                segs.append(0)
            all_layers = encoder_layers(w, cfg, ids, mask, segs)
            features = []
            for i, token in enumerate(tokens):
                ls = []
                for li in layer_indexes:
                    d = collections.OrderedDict()
                    d["index"] = li
                    d["values"] = [round(float(x), 6) for x in all_layers[li][i]]
                    ls.append(d)
                feat = collections.OrderedDict()
                feat["token"] = token
                feat["layers"] = ls
                features.append(feat)
            j = collections.OrderedDict()
            j["linex_index"] = unique_id
            j["features"] = features
            out.write(json.dumps(j) + "\n")


if __name__ == "__main__":
    main()
