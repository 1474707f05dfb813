"""ONNX Runtime int8 on the same fine-tuned classifier as est's int8 (issue 36 item 3): accuracy
and agreement next to est's, on SST-2 or MRPC (their dev.tsv and test.tsv).

  ort_int8_accuracy.py --task sst-2|mrpc --hf_dir DIR --data_dir data/SST-2 --max_seq_length 64
                       --out OUT [--est_fp32 A/test_results.tsv --est_int8 B/test_results.tsv]

DIR: the classifier as a HuggingFace directory, written by est from its checkpoint
(`est ckpt export_hf ... --labels=0,1`, docs/hf.md section 6), so both runtimes hold the same
weights. It is exported to ONNX (torch.onnx, opset 17, eager attention), fused by
onnxruntime.transformers' optimize_model (model_type bert) as bench/peers/ort_bert.py does,
and quantized by quantize_dynamic (per_channel=True, weight_type=QInt8: the recipe of
bench/peers/ort_int8.py). Inputs: the vocabulary in DIR through BertTokenizer (Google's
FullTokenizer's tokens), [CLS] sentence [SEP] (MRPC: [CLS] a [SEP] b [SEP], the longer one
cut first, as run_classifier's _truncate_seq_pair), padded to max_seq_length, as
run_classifier's features. Prints one JSON line: dev accuracy (MRPC: and F1) of ORT fp32 and
int8; on the test set, how many
argmaxes ORT int8 shares with ORT fp32, and, given est's test_results.tsv files, est fp32 with
ORT fp32 (the same model in two runtimes) and est int8 with est fp32.
"""
import argparse
import csv
import json
import os
import sys

import numpy as np


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quotechar=None))


def features(tok, texts, seq):
    # texts: sentences, or (a, b) pairs; longest_first drops the longer text's last token first
    if texts and isinstance(texts[0], tuple):
        enc = tok([t[0] for t in texts], [t[1] for t in texts], max_length=seq, truncation="longest_first",
                  padding="max_length", return_tensors="np")
    else:
        enc = tok(texts, max_length=seq, truncation=True, padding="max_length", return_tensors="np")
    return {"input_ids": enc["input_ids"].astype(np.int64),
            "input_mask": enc["attention_mask"].astype(np.int64),
            "segment_ids": enc["token_type_ids"].astype(np.int64)}


def argmax_of(sess, feeds, batch=64):
    out = []
    n = len(feeds["input_ids"])
    for i in range(0, n, batch):
        out.append(sess.run(None, {k: v[i:i + batch] for k, v in feeds.items()})[0])
    return np.concatenate(out).argmax(axis=1)


def est_argmax(path):
    return np.array([int(np.argmax([float(x) for x in row])) for row in read_tsv(path) if row])


def fp32_and_int8_sessions(module, cfg, feeds, outputs, out_dir):
    """ONNX Runtime sessions {"fp32", "int8"} of a torch module called as module(ids, mask, segs):
    exported (opset 17, feeds' names, outputs: name -> dynamic axes), fused by optimize_model
    (model_type bert, cfg's heads and width) into out_dir/fp32.onnx, and that quantized by
    quantize_dynamic (per-channel QInt8, bench/peers/ort_int8.py's recipe) into int8.onnx."""
    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    os.makedirs(out_dir, exist_ok=True)
    raw, fp32, int8 = (os.path.join(out_dir, n) for n in ("raw.onnx", "fp32.onnx", "int8.onnx"))
    args = tuple(torch.from_numpy(feeds[k][:2]) for k in ("input_ids", "input_mask", "segment_ids"))
    dyn = {k: {0: "batch", 1: "seq"} for k in feeds}
    dyn.update(outputs)
    torch.onnx.export(module, args, raw, input_names=list(feeds), output_names=list(outputs), dynamic_axes=dyn,
                      opset_version=17, do_constant_folding=True)
    optimize_model(raw, model_type="bert", num_heads=cfg.num_attention_heads,
                   hidden_size=cfg.hidden_size).save_model_to_file(fp32)
    quantize_dynamic(fp32, int8, per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    return {p: ort.InferenceSession(g, opts, providers=["CPUExecutionProvider"]) for p, g in
            (("fp32", fp32), ("int8", int8))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=("sst-2", "mrpc"), default="sst-2")
    ap.add_argument("--hf_dir", required=True)
    ap.add_argument("--data_dir", required=True)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--out", required=True, help="directory for the two ONNX graphs")
    ap.add_argument("--est_fp32")
    ap.add_argument("--est_int8")
    a = ap.parse_args()

    import onnxruntime as ort
    import torch
    from transformers import BertForSequenceClassification, BertTokenizer

    model = BertForSequenceClassification.from_pretrained(a.hf_dir, attn_implementation="eager").eval()
    tok = BertTokenizer.from_pretrained(a.hf_dir)
    cfg = model.config
    dev = read_tsv(os.path.join(a.data_dir, "dev.tsv"))[1:]
    test = read_tsv(os.path.join(a.data_dir, "test.tsv"))[1:]
    if a.task == "sst-2":  # dev: sentence, label; test: index, sentence
        dev_texts, labels, test_texts = [r[0] for r in dev], [r[1] for r in dev], [r[1] for r in test]
    else:  # dev: label, id, id, a, b; test: index, id, id, a, b
        dev_texts, labels = [(r[3], r[4]) for r in dev], [r[0] for r in dev]
        test_texts = [(r[3], r[4]) for r in test]
    dev_feeds = features(tok, dev_texts, a.max_seq_length)
    labels = np.array([int(x) for x in labels])
    test_feeds = features(tok, test_texts, a.max_seq_length)

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask, segs):
            return self.m(input_ids=ids, attention_mask=mask, token_type_ids=segs).logits

    sess = fp32_and_int8_sessions(Logits().eval(), cfg, dev_feeds, {"logits": {0: "batch"}}, a.out)
    dev_pred = {p: argmax_of(s, dev_feeds) for p, s in sess.items()}
    test_pred = {p: argmax_of(s, test_feeds) for p, s in sess.items()}
    res = {"onnxruntime": ort.__version__, "torch": torch.__version__, "dev_examples": len(labels),
           "ort_fp32_dev_accuracy": float(np.mean(dev_pred["fp32"] == labels)),
           "ort_int8_dev_accuracy": float(np.mean(dev_pred["int8"] == labels)),
           "test_examples": len(test),
           "test_argmax_equal_ort_int8_ort_fp32": int(np.sum(test_pred["int8"] == test_pred["fp32"]))}
    if a.task == "mrpc":
        for p in ("fp32", "int8"):
            tp = int(np.sum((dev_pred[p] == 1) & (labels == 1)))
            res["ort_%s_dev_f1" % p] = 2 * tp / (int(np.sum(dev_pred[p] == 1)) + int(np.sum(labels == 1)))
    if a.est_fp32:
        e32 = est_argmax(a.est_fp32)
        if len(e32) != len(test):
            sys.exit("%s: %d rows, test.tsv has %d examples" % (a.est_fp32, len(e32), len(test)))
        res["test_argmax_equal_est_fp32_ort_fp32"] = int(np.sum(e32 == test_pred["fp32"]))
        if a.est_int8:
            e8 = est_argmax(a.est_int8)
            if len(e8) != len(test):
                sys.exit("%s: %d rows, test.tsv has %d examples" % (a.est_int8, len(e8), len(test)))
            res["test_argmax_equal_est_int8_est_fp32"] = int(np.sum(e8 == e32))
            res["test_argmax_equal_est_int8_ort_int8"] = int(np.sum(e8 == test_pred["int8"]))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
