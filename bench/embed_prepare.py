#!/usr/bin/env python3
"""all-MiniLM-L6-v2 (a HuggingFace + sentence-transformers directory) as est reads a model
today: Google's variable names in a safetensors file (then `est ckpt convert` to a TF
checkpoint), bert_config.json, vocab.txt from tokenizer.json, and the sentence-transformers
files beside the config. A bench-only bridge until est loads HF directories itself (issue 34
item 1). Needs numpy and safetensors.

    python3 bench/embed_prepare.py HF_DIR OUT_DIR && est ckpt convert OUT_DIR/google.safetensors OUT_DIR/model.ckpt
"""
import json
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def google_name(hf):
    """BertModel's names -> modeling.py's; (name, transpose?) or None to drop."""
    if hf == "embeddings.position_ids":
        return None
    n = "bert/" + hf
    n = n.replace("encoder.layer.", "encoder/layer_").replace(".", "/")
    n = n.replace("LayerNorm/weight", "LayerNorm/gamma").replace("LayerNorm/bias", "LayerNorm/beta")
    n = n.replace("_embeddings/weight", "_embeddings")
    if n.endswith("/weight"):
        return n[: -len("/weight")] + "/kernel", True  # Linear [out, in] -> TF kernel [in, out]
    return n, False


def main(hf_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    tensors = {}
    for k, v in load_file(os.path.join(hf_dir, "model.safetensors")).items():
        g = google_name(k)
        if g:
            tensors[g[0]] = np.ascontiguousarray(v.T if g[1] else v).astype(np.float32)
    save_file(tensors, os.path.join(out_dir, "google.safetensors"))
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    keep = ["attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size", "initializer_range",
            "intermediate_size", "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
            "type_vocab_size", "vocab_size"]
    json.dump({k: cfg[k] for k in keep}, open(os.path.join(out_dir, "bert_config.json"), "w"), indent=2)
    vocab = json.load(open(os.path.join(hf_dir, "tokenizer.json")))["model"]["vocab"]
    with open(os.path.join(out_dir, "vocab.txt"), "w") as f:
        for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            f.write(tok + "\n")
    shutil.copy(os.path.join(hf_dir, "modules.json"), out_dir)
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    shutil.copy(os.path.join(hf_dir, "1_Pooling", "config.json"), os.path.join(out_dir, "1_Pooling"))
    print(len(tensors), "tensors ->", out_dir)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
