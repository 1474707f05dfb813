"""The peer of bench/bench_squad_features.c: run_squad.py's own feature conversion, unchanged.

  squad_features_py.py --vocab_file V --input F --output R [--mode train|predict]
                       [--version_2_with_negative] [--max_seq_length 384] [--doc_stride 128]
                       [--max_query_length 64]

What run_squad.py's main() does before training / predicting: read_squad_examples, for
training random.Random(12345).shuffle, convert_examples_to_features into FeatureWriter
(tf.io.TFRecordWriter). The code is Google's, from the PyPI package bert-tensorflow 1.0.4 on
TensorFlow 2.15 (tests/interop/requirements.txt; run it with .venv-interop's python), imported
as tests/interop/test_squad_oracle.py does. Prints "python <mode> <examples> examples
<features> features <seconds> s" (read + convert + write, after the imports; the script also
times the whole process).
"""
import argparse
import random
import sys
import time
import types

import tensorflow as tf

# bert-tensorflow's modeling.py (imported by run_squad.py) imports tensorflow.contrib, gone in
# TF 2; nothing here calls it.
sys.modules.setdefault("tensorflow.contrib", types.SimpleNamespace(layers=None))
from bert import run_squad, tokenization  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--mode", default="predict", choices=["train", "predict"])
    ap.add_argument("--version_2_with_negative", action="store_true")
    ap.add_argument("--max_seq_length", type=int, default=384)
    ap.add_argument("--doc_stride", type=int, default=128)
    ap.add_argument("--max_query_length", type=int, default=64)
    a = ap.parse_args()
    flags = run_squad.FLAGS
    if not flags.is_parsed():
        flags.mark_as_parsed()
    flags.version_2_with_negative = a.version_2_with_negative
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    is_training = a.mode == "train"
    t0 = time.perf_counter()
    examples = run_squad.read_squad_examples(a.input, is_training)
    if is_training:
        random.Random(12345).shuffle(examples)
    tokenizer = tokenization.FullTokenizer(vocab_file=a.vocab_file, do_lower_case=True)
    writer = run_squad.FeatureWriter(filename=a.output, is_training=is_training)
    run_squad.convert_examples_to_features(examples=examples, tokenizer=tokenizer, max_seq_length=a.max_seq_length,
                                           doc_stride=a.doc_stride, max_query_length=a.max_query_length,
                                           is_training=is_training, output_fn=writer.process_feature)
    writer.close()
    print(f"python {a.mode} {len(examples)} examples {writer.num_features} features "
          f"{time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
