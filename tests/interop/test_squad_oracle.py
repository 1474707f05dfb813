"""run_squad.py's own feature conversion as an oracle for `est run_squad`'s records.

The oracle is Google's `bert-tensorflow` 1.0.4 package (PyPI, google-research/bert's code
with `import tensorflow.compat.v1 as tf`; read_squad_examples, convert_examples_to_features
and FeatureWriter are the repository's unchanged), run on TensorFlow 2.15 with TF's own
tf.train.Example and TFRecordWriter. For every SQuAD file of tests/data/squad that each mode
can read, at two window settings:

- training (1.1 and 2.0): est's train.tf_record against main()'s steps: read_squad_examples,
  random.Random(12345).shuffle, convert_examples_to_features into FeatureWriter;
- prediction: est's eval.tf_record (written by `--do_predict` from the checkpoint of a
  one-step training run) against the same conversion with is_training=False.

Records are compared parsed (tf.train.Example, every feature's int64 values) and in order:
TF's serializer writes an Example's map in hash order (docs/example.md §2), est in key order.
"""
import glob
import json
import os
import random
import subprocess

import sys
import types

import pytest
import tensorflow as tf

from conftest import CONFIG, DATA, EST, VOCAB

# bert-tensorflow's modeling.py (which run_squad.py imports) imports tensorflow.contrib, gone
# in TF 2; nothing here calls it, so an empty stand-in lets the import through.
sys.modules.setdefault("tensorflow.contrib", types.SimpleNamespace(layers=None))
from bert import run_squad, tokenization  # noqa: E402  (the oracle)

FLAGS = run_squad.FLAGS
if not FLAGS.is_parsed():
    FLAGS.mark_as_parsed()

SQUAD = os.path.join(DATA, "squad")
# (max_seq_length, doc_stride, max_query_length): several windows per context, and one
# where the stride is longer than a window's document part.
SETTINGS = [(64, 16, 12), (40, 30, 8)]
TRAIN_FILES = [("windows_v1.json", False), ("windows_v2.json", True), ("edge_v1.json", False),
               ("edge_v2.json", True)]
PREDICT_FILES = [(os.path.basename(p), "v2" in os.path.basename(p)) for p in sorted(glob.glob(SQUAD + "/*.json"))
                 if not os.path.basename(p).startswith("err_") and "preds" not in p and "_na" not in p
                 and "golden" not in p]


def reference_records(path, is_training, v2, setting, out):
    """main()'s conversion of `path` into `out`; returns (examples, parsed records)."""
    max_seq_length, doc_stride, max_query_length = setting
    FLAGS.version_2_with_negative = v2
    tokenizer = tokenization.FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
    examples = run_squad.read_squad_examples(path, is_training)
    if is_training:
        random.Random(12345).shuffle(examples)
    writer = run_squad.FeatureWriter(filename=out, is_training=is_training)
    run_squad.convert_examples_to_features(examples=examples, tokenizer=tokenizer, max_seq_length=max_seq_length,
                                           doc_stride=doc_stride, max_query_length=max_query_length,
                                           is_training=is_training, output_fn=writer.process_feature)
    writer.close()
    return examples, parsed(out)


def parsed(path):
    records = []
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        ex = tf.train.Example.FromString(raw)
        records.append({k: list(v.int64_list.value) for k, v in ex.features.feature.items()})
    return records


def est_run_squad(out, setting, *args):
    max_seq_length, doc_stride, max_query_length = setting
    p = subprocess.run([EST, "run_squad", f"--vocab_file={VOCAB}", f"--bert_config_file={CONFIG}",
                        f"--output_dir={out}", f"--max_seq_length={max_seq_length}", f"--doc_stride={doc_stride}",
                        f"--max_query_length={max_query_length}", "--num_threads=2", *args], capture_output=True)
    log = p.stderr.decode(errors="replace")
    assert p.returncode == 0, log
    return log


def assert_same_records(got, want, what):
    assert len(got) == len(want), f"{what}: est wrote {len(got)} records, run_squad.py {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"{what}: record {i} differs: est {json.dumps(g)[:300]} vs {json.dumps(w)[:300]}"


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "%d-%d-%d" % s)
@pytest.mark.parametrize("name,v2", TRAIN_FILES, ids=[n for n, _ in TRAIN_FILES])
def test_train_and_eval_records(tmp_path, name, v2, setting):
    path = os.path.join(SQUAD, name)
    examples, want = reference_records(path, True, v2, setting, str(tmp_path / "ref_train.tf_record"))
    out = tmp_path / "est"
    v2_flag = ["--version_2_with_negative"] if v2 else []
    # one training step of the whole file, so the checkpoint exists for --do_predict
    est_run_squad(out, setting, "--do_train", f"--train_file={path}", f"--train_batch_size={len(examples)}",
                  "--num_train_epochs=1", *v2_flag)
    assert_same_records(parsed(str(out / "train.tf_record")), want, f"{name} train.tf_record")
    for predict_name, predict_v2 in PREDICT_FILES:
        predict_path = os.path.join(SQUAD, predict_name)
        _, want = reference_records(predict_path, False, predict_v2, setting, str(tmp_path / "ref_eval.tf_record"))
        est_run_squad(out, setting, "--do_predict", f"--predict_file={predict_path}",
                      *(["--version_2_with_negative"] if predict_v2 else []))
        assert_same_records(parsed(str(out / "eval.tf_record")), want, f"{predict_name} eval.tf_record")
        assert os.path.exists(out / "predictions.json")
