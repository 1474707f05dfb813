"""ONNX Runtime int8 on the same SQuAD model as est's int8 (issue 36 item 3): predictions.json of
ONNX Runtime fp32 and int8, to score with `est squad_eval` next to est's.

  ort_int8_squad.py --hf_dir DIR --predict_file dev.json --max_seq_length 256 --doc_stride 128
                    --out OUT

DIR: the QA model as a HuggingFace directory written by est from its checkpoint (`est ckpt
export_hf`, docs/hf.md section 6: BertForQuestionAnswering), so both runtimes hold the same
weights. It is exported to ONNX (torch.onnx, opset 17, eager attention), fused by
onnxruntime.transformers' optimize_model and quantized by quantize_dynamic (per_channel=True,
weight_type=QInt8) by bench/peers/ort_int8_accuracy.py's fp32_and_int8_sessions.

Everything around the model is Google's run_squad.py (the `bert-tensorflow` 1.0.4 package, as
tests/interop/test_squad_oracle.py imports it): read_squad_examples and
convert_examples_to_features make the windows (the records `est run_squad` writes, which that
test holds est to), and write_predictions (n_best_size 20, max_answer_length 30, v1.1) turns
each runtime's start and end logits into OUT/{fp32,int8}/predictions.json. Needs TensorFlow
(for the package's imports), torch, transformers, onnx and onnxruntime: `make interop`'s venv
with onnx and onnxruntime on PYTHONPATH.
"""
import argparse
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_int8_accuracy import fp32_and_int8_sessions  # noqa: E402  (the same export and quantization)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf_dir", required=True)
    ap.add_argument("--predict_file", required=True)
    ap.add_argument("--max_seq_length", type=int, default=384)
    ap.add_argument("--doc_stride", type=int, default=128)
    ap.add_argument("--max_query_length", type=int, default=64)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import torch
    from transformers import BertForQuestionAnswering
    # bert-tensorflow's modeling.py imports tensorflow.contrib, gone in TF 2; unused here
    sys.modules.setdefault("tensorflow.contrib", types.SimpleNamespace(layers=None))
    from bert import run_squad, tokenization

    flags = run_squad.FLAGS
    if not flags.is_parsed():
        flags.mark_as_parsed()
    flags.version_2_with_negative = False
    flags.verbose_logging = False
    tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(a.hf_dir, "vocab.txt"), do_lower_case=True)
    examples = run_squad.read_squad_examples(a.predict_file, is_training=False)
    features = []
    run_squad.convert_examples_to_features(examples=examples, tokenizer=tokenizer, max_seq_length=a.max_seq_length,
                                           doc_stride=a.doc_stride, max_query_length=a.max_query_length,
                                           is_training=False, output_fn=features.append)
    feeds = {"input_ids": np.array([f.input_ids for f in features], dtype=np.int64),
             "input_mask": np.array([f.input_mask for f in features], dtype=np.int64),
             "segment_ids": np.array([f.segment_ids for f in features], dtype=np.int64)}

    model = BertForQuestionAnswering.from_pretrained(a.hf_dir, attn_implementation="eager").eval()
    cfg = model.config

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids, mask, segs):
            out = self.m(input_ids=ids, attention_mask=mask, token_type_ids=segs)
            return out.start_logits, out.end_logits

    sess = fp32_and_int8_sessions(Logits().eval(), cfg, feeds, {"start_logits": {0: "batch", 1: "seq"},
                                                                 "end_logits": {0: "batch", 1: "seq"}}, a.out)
    for precision in ("fp32", "int8"):
        results = []
        for i in range(0, len(features), 32):
            start, end = sess[precision].run(None, {k: v[i:i + 32] for k, v in feeds.items()})
            for f, s, e in zip(features[i:i + 32], start, end):
                results.append(run_squad.RawResult(unique_id=f.unique_id, start_logits=[float(x) for x in s],
                                                   end_logits=[float(x) for x in e]))
        d = os.path.join(a.out, precision)
        os.makedirs(d, exist_ok=True)
        run_squad.write_predictions(examples, features, results, 20, 30, True, os.path.join(d, "predictions.json"),
                                    os.path.join(d, "nbest_predictions.json"), os.path.join(d, "null_odds.json"))
        print("%s: %d examples, %d features -> %s/predictions.json" % (precision, len(examples), len(features), d))


main()
