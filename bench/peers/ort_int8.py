"""ONNX Runtime int8 peer of `bench_bert --precision int8` (inference only).

  ort_int8.py --model M --dir DIR
      reads DIR/bert_<M>.onnx (the BERT-optimized fp32 graph written by
      `ort_bert.py export`), quantizes it with onnxruntime.quantization.quantize_dynamic
      (per_channel=True, weight_type=QInt8: weights int8 per output channel, activations
      uint8 with a scale computed at run time, ONNX Runtime's recommended recipe for BERT on
      CPU) into DIR/int8/bert_<M>.onnx, and prints the largest logit difference from the fp32
      graph on the benchmark's inputs and the quantized operator counts.

Time it with `ort_bert.py run --model M --dir DIR/int8` (the same runner and inputs as the
fp32 peer). bench/run_infer_peers.sh does both.
"""
import argparse
import collections
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_bert  # noqa: E402  (inputs(): the benchmark's ids, mask, segments)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="base", choices=sorted(ort_bert.MODELS))
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()

    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = os.path.join(a.dir, "bert_%s.onnx" % a.model)
    if not os.path.exists(src):
        sys.exit("ort_int8: %s not found (run ort_bert.py export --model %s --out %s)" %
                 (src, a.model, a.dir))
    out_dir = os.path.join(a.dir, "int8")
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, "bert_%s.onnx" % a.model)
    tmp = os.path.join(out_dir, "bert_%s.tmp.onnx" % a.model)
    # DefaultTensorType: shape inference gives no type to the outputs of the fused com.microsoft
    # operators (Attention, SkipLayerNormalization), which the quantizer needs for MatMuls
    # reading them; they are all fp32
    quantize_dynamic(src, tmp, per_channel=True, weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    os.replace(tmp, dst)

    ops = collections.Counter(n.op_type for n in onnx.load(dst).graph.node)
    feeds = ort_bert.inputs(32, 128)
    fp32 = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    int8 = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    info = {"model": a.model, "onnxruntime": ort.__version__,
            "ops": {k: v for k, v in sorted(ops.items())},
            "max_abs_logit_diff_vs_fp32": float(np.max(np.abs(int8 - fp32)))}
    print(json.dumps(info))


if __name__ == "__main__":
    main()
