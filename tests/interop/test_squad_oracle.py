"""run_squad.py's own feature conversion and write_predictions as oracles for `est run_squad`.

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

On a larger sample (squad2_dev_first5.json: the first 5 articles of SQuAD 2.0's dev set, 1407
questions) read as 1.1 and as 2.0, at three window settings: est trains a small model, predicts
with --raw_results_file, and Google's write_predictions, fed est's logits (float32, exactly)
with Google's own examples and features, must write predictions.json, nbest_predictions.json
and null_odds.json byte for byte as est did.
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
LARGE_SAMPLE = "squad2_dev_first5.json"
PREDICT_FILES = [(os.path.basename(p), "v2" in os.path.basename(p)) for p in sorted(glob.glob(SQUAD + "/*.json"))
                 if not os.path.basename(p).startswith("err_") and "preds" not in p and "_na" not in p
                 and "golden" not in p and os.path.basename(p) != LARGE_SAMPLE]


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


# ---- write_predictions on a larger sample ------------------------------------------------

def config_with_positions(path, positions):
    """bert_config_h32.json with max_position_embeddings `positions` (384-token windows)."""
    with open(CONFIG) as f:
        config = json.load(f)
    config["max_position_embeddings"] = positions
    with open(path, "w") as f:
        json.dump(config, f)
    return str(path)


@pytest.fixture(scope="module")
def squad_model(tmp_path_factory):
    """A checkpoint trained one epoch on the large sample (2.0, 128-token windows), so the
    logits it gives are a trained model's, not noise; 512 positions for the 384 setting."""
    out = tmp_path_factory.mktemp("squad_model")
    config = config_with_positions(out / "bert_config.json", 512)
    # a dev file has up to 5 answers a question; training takes one (the first), as train-v2.0
    with open(os.path.join(SQUAD, LARGE_SAMPLE)) as f:
        data = json.load(f)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    train_file = out / "train.json"
    train_file.write_text(json.dumps(data))
    p = subprocess.run([EST, "run_squad", f"--vocab_file={VOCAB}", f"--bert_config_file={config}",
                        f"--output_dir={out}", "--do_train", f"--train_file={train_file}",
                        "--version_2_with_negative", "--max_seq_length=128", "--doc_stride=64",
                        "--max_query_length=32", "--train_batch_size=32", "--num_train_epochs=1",
                        "--learning_rate=1e-3", "--num_threads=2"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return out, config


def raw_results(path):
    """est's --raw_results_file as run_squad.py's RawResults: float32 logits as Python floats
    (what its main() makes of the estimator's numpy float32 arrays)."""
    results = []
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        f = tf.train.Example.FromString(raw).features.feature
        results.append(run_squad.RawResult(unique_id=int(f["unique_ids"].int64_list.value[0]),
                                           start_logits=[float(x) for x in f["start_logits"].float_list.value],
                                           end_logits=[float(x) for x in f["end_logits"].float_list.value]))
    return results


# (version_2_with_negative, (max_seq_length, doc_stride, max_query_length), n_best_size,
#  max_answer_length, null_score_diff_threshold): run_squad.py's windows, then smaller ones with
#  fewer and shorter candidates, as 1.1 and as 2.0. The model favours the null answer (half the
#  sample is impossible), its score_diff ~6.5-11.3: thresholds near 10 give both kinds of
#  answer. n_best_size stays 20 where 2.0 is read, so that no example has only null entries
#  (where the script crashes; est's answer there is tested in test_squad_predictions).
PREDICTION_SETTINGS = [
    (True, (384, 128, 64), 20, 30, 10.5),
    (False, (384, 128, 64), 20, 30, 0.0),
    (True, (128, 64, 32), 20, 10, -1.0),
    (False, (96, 32, 24), 3, 8, 0.0),
    (True, (96, 32, 24), 20, 30, 10.0),
]


@pytest.mark.parametrize("v2,setting,n_best,max_answer,threshold", PREDICTION_SETTINGS,
                         ids=lambda v: str(v).replace(" ", ""))
def test_write_predictions_on_est_logits(tmp_path, squad_model, v2, setting, n_best, max_answer, threshold):
    model_dir, config = squad_model
    path = os.path.join(SQUAD, LARGE_SAMPLE)
    max_seq_length, doc_stride, max_query_length = setting
    out = tmp_path / "est"
    out.mkdir()
    raw_file = tmp_path / "raw_results.tf_record"
    p = subprocess.run([EST, "run_squad", f"--vocab_file={VOCAB}", f"--bert_config_file={config}",
                        f"--init_checkpoint={model_dir}/model.ckpt-{num_steps(model_dir)}", f"--output_dir={out}",
                        "--do_predict", f"--predict_file={path}", f"--max_seq_length={max_seq_length}",
                        f"--doc_stride={doc_stride}", f"--max_query_length={max_query_length}",
                        f"--n_best_size={n_best}", f"--max_answer_length={max_answer}",
                        f"--null_score_diff_threshold={threshold}", "--predict_batch_size=64", "--num_threads=2",
                        f"--raw_results_file={raw_file}", *(["--version_2_with_negative"] if v2 else [])],
                       capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")

    # Google's side: its examples and features, est's logits
    FLAGS.version_2_with_negative = v2
    FLAGS.null_score_diff_threshold = threshold
    FLAGS.verbose_logging = False
    tokenizer = tokenization.FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
    examples = run_squad.read_squad_examples(path, is_training=False)
    features = []
    run_squad.convert_examples_to_features(examples=examples, tokenizer=tokenizer, max_seq_length=max_seq_length,
                                           doc_stride=doc_stride, max_query_length=max_query_length,
                                           is_training=False, output_fn=features.append)
    results = raw_results(str(raw_file))
    assert [r.unique_id for r in results] == [f.unique_id for f in features], \
        "est's raw results are not one per run_squad.py feature, in its order"
    assert len(features) > len(examples)  # several windows per context at every setting
    # est's eval.tf_record: the same features (the records oracle above, on this sample)
    got = parsed(str(out / "eval.tf_record"))
    for i, (g, f) in enumerate(zip(got, features)):
        assert g["input_ids"] == f.input_ids and g["segment_ids"] == f.segment_ids and \
            g["input_mask"] == f.input_mask, f"eval.tf_record record {i} differs from run_squad.py's feature"
    ref = tmp_path / "ref"
    ref.mkdir()
    run_squad.write_predictions(examples, features, results, n_best, max_answer, True,
                                str(ref / "predictions.json"), str(ref / "nbest_predictions.json"),
                                str(ref / "null_odds.json"))
    names = ["predictions.json", "nbest_predictions.json"] + (["null_odds.json"] if v2 else [])
    for name in names:
        want, have = (ref / name).read_bytes(), (out / name).read_bytes()
        if want != have:
            at = next(i for i in range(min(len(want), len(have)) + 1) if want[i:i + 1] != have[i:i + 1])
            raise AssertionError(f"{name} differs from write_predictions' at byte {at}: est "
                                 f"{have[max(0, at - 120):at + 120]!r} vs {want[max(0, at - 120):at + 120]!r}")
    if not v2:
        assert not (out / "null_odds.json").exists()
    # every question answered, and the candidates are a trained model's: many different texts
    assert len(json.loads((out / "predictions.json").read_text())) == len(examples)
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert len({e["text"] for entries in nbest.values() for e in entries if e["text"]}) > 500


def num_steps(model_dir):
    with open(os.path.join(model_dir, "checkpoint")) as f:
        first = f.readline()  # model_checkpoint_path: "model.ckpt-N"
    return int(first.split("-")[-1].strip().strip('"'))
