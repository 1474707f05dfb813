#!/usr/bin/env python3
"""Golden run_squad.py predictions and training records for est (developer tool; `make test`
does not run it).

Runs google-research/bert's run_squad.py, unchanged, imported from a checkout of that
repository, with the stand-in `tensorflow` of squad_features_reference.py (tf.logging.info
recorded, tf.gfile.GFile = open):

1. "predictions": read_squad_examples (prediction mode) + convert_examples_to_features on a
   fixture, then write_predictions fed fixed logits for every feature: the RawResults a model
   would give, drawn here from a seeded random.Random as float32 values (kept in the golden
   as their IEEE bits, so est is fed exactly the same numbers). Logit kinds: "grid"
   (multiples of 0.25: many ties, so the stable sorts' order matters), "gauss" (any float32),
   "null" (v2: position 0 favoured, so null answers win, and with n_best_size 1 every entry
   is null: the reference then raises, recorded as "error"). The golden keeps the three files
   write_predictions writes, byte for byte, and its tf.logging.info lines (verbose_logging on).
2. "train_records": main()'s training input: read_squad_examples (training), the examples
   shuffled with random.Random(12345), convert_examples_to_features into FeatureWriter; the
   golden keeps the serialized records (hex) in file order.

usage: /tmp/squadref/bin/python tests/reference/squad_predictions_reference.py /tmp/bert-ref \
           tests/data > tests/data/squad/predictions_golden.json
"""
import json
import os
import random
import struct
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from squad_features_reference import TFRecordWriter, import_reference  # noqa: E402

# (fixture, version_2, vocab, do_lower_case, (max_seq, stride, query), n_best, max_answer_length,
#  null_score_diff_threshold, logits kind, seed)
PREDICTION_RUNS = [
    ("windows_v1.json", False, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "gauss", 1),
    ("windows_v1.json", False, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "grid", 2),
    ("windows_v1.json", False, "vocab_uncased.txt", True, (32, 24, 6), 3, 4, 0.0, "grid", 3),
    ("edge_v1.json", False, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "gauss", 4),
    ("edge_v1.json", False, "vocab_cased.txt", False, (64, 16, 12), 20, 30, 0.0, "gauss", 5),
    ("edge_v1_escaped.json", False, "vocab_uncased.txt", True, (32, 24, 6), 5, 8, 0.0, "grid", 6),
    ("allennlp_squad.json", False, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "gauss", 7),
    ("allennlp_squad.json", False, "vocab_cased.txt", False, (32, 24, 6), 20, 30, 0.0, "grid", 8),
    ("windows_v2.json", True, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "gauss", 9),
    ("windows_v2.json", True, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, -1.5, "grid", 10),
    ("windows_v2.json", True, "vocab_uncased.txt", True, (32, 24, 6), 4, 6, 2.0, "null", 11),
    ("edge_v2.json", True, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "gauss", 12),
    ("edge_v2.json", True, "vocab_uncased.txt", True, (32, 24, 6), 20, 30, 0.5, "null", 13),
    ("allennlp_squad2.json", True, "vocab_uncased.txt", True, (64, 16, 12), 20, 30, 0.0, "grid", 14),
    ("allennlp_squad2.json", True, "vocab_uncased.txt", True, (64, 16, 12), 1, 30, 0.0, "null", 15),
    ("windows_v2.json", True, "vocab_uncased.txt", True, (64, 16, 12), 1, 30, 0.0, "null", 16),
]
# (fixture, version_2, (max_seq, stride, query))
TRAIN_RUNS = [
    ("windows_v1.json", False, (64, 16, 12)),
    ("windows_v2.json", True, (64, 16, 12)),
    ("edge_v2.json", True, (32, 24, 6)),
]


def float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def draw_logits(rng, kind, seq_length):
    if kind == "grid":
        v = [round(rng.uniform(-4, 4) * 4) / 4 for _ in range(seq_length)]
    else:
        v = [rng.gauss(0.0, 3.0) for _ in range(seq_length)]
    if kind == "null":
        v[0] = abs(v[0]) + 6.0
    return [float32(x) for x in v]


def read(path):
    with open(path, encoding="ascii") as f:
        return f.read()


CRASH = """      score_diff = score_null - best_non_null_entry.start_logit - (
          best_non_null_entry.end_logit)
      scores_diff_json[example.qas_id] = score_diff
      if score_diff > FLAGS.null_score_diff_threshold:"""
ANSWERED = """      if best_non_null_entry is None:
        scores_diff_json[example.qas_id] = score_null
        all_predictions[example.qas_id] = ""
        all_nbest_json[example.qas_id] = nbest_json
        continue
      score_diff = score_null - best_non_null_entry.start_logit - (
          best_non_null_entry.end_logit)
      scores_diff_json[example.qas_id] = score_diff
      if score_diff > FLAGS.null_score_diff_threshold:"""


def est_answered(run_squad):
    """run_squad.py's write_predictions with est's answer where it raises (every n-best entry
    null in version 2): a copy of the module whose source differs in that branch only."""
    with open(run_squad.__file__) as f:
        source = f.read()
    assert source.count(CRASH) == 1
    module = types.ModuleType("run_squad_est")
    module.__file__ = run_squad.__file__
    exec(compile(source.replace(CRASH, ANSWERED).replace('if __name__ == "__main__":', "if False:"),
                 "run_squad_est", "exec"), module.__dict__)
    return module


def main():
    bert_dir, data_dir = sys.argv[1], sys.argv[2]
    infos = []
    run_squad, tokenization = import_reference(bert_dir, infos)

    est_version = est_answered(run_squad)
    tmp = "/tmp/squad_predictions_reference"
    os.makedirs(tmp, exist_ok=True)
    files = [os.path.join(tmp, n) for n in ("predictions.json", "nbest_predictions.json", "null_odds.json")]
    runs = []
    for (name, v2, vocab, lower, (seq, stride, query), n_best, max_len, thresh, kind, seed) in PREDICTION_RUNS:
        run_squad.FLAGS.version_2_with_negative = v2
        run_squad.FLAGS.null_score_diff_threshold = thresh
        run_squad.FLAGS.verbose_logging = True
        tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(data_dir, vocab), do_lower_case=lower)
        examples = run_squad.read_squad_examples(os.path.join(data_dir, "squad", name), False)
        features = []
        run_squad.convert_examples_to_features(
            examples=examples, tokenizer=tokenizer, max_seq_length=seq, doc_stride=stride,
            max_query_length=query, is_training=False, output_fn=features.append)
        rng = random.Random(seed)
        results, logits = [], []
        for f in features:
            start, end = draw_logits(rng, kind, seq), draw_logits(rng, kind, seq)
            results.append(run_squad.RawResult(unique_id=f.unique_id, start_logits=start, end_logits=end))
            logits.append({"start": [bits(x) for x in start], "end": [bits(x) for x in end]})
        run = {"fixture": name, "version_2_with_negative": v2, "vocab": vocab, "do_lower_case": lower,
               "max_seq_length": seq, "doc_stride": stride, "max_query_length": query, "n_best_size": n_best,
               "max_answer_length": max_len, "null_score_diff_threshold": thresh, "logits_kind": kind,
               "logits": logits}
        for path in files:
            if os.path.exists(path):
                os.remove(path)
        del infos[:]
        try:
            run_squad.write_predictions(examples, features, results, n_best, max_len, lower, *files)
        except Exception as exc:  # the reference's own failure: est answers instead
            run["error"] = "%s: %s" % (type(exc).__name__, exc)
            # what est writes there (docs/squad.md §9): the reference with that one case
            # answered, "" and null odds score_null, everything else its own code
            est_version.FLAGS = run_squad.FLAGS
            est_version.write_predictions(examples, features, results, n_best, max_len, lower, *files)
        run["predictions"], run["nbest"], run["null_odds"] = [read(p) for p in files[:3 if v2 else 2]] + \
            ([] if v2 else [None])
        run["log"] = list(infos)
        runs.append(run)

    train = []
    tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(data_dir, "vocab_uncased.txt"), do_lower_case=True)
    for name, v2, (seq, stride, query) in TRAIN_RUNS:
        run_squad.FLAGS.version_2_with_negative = v2
        examples = run_squad.read_squad_examples(os.path.join(data_dir, "squad", name), True)
        random.Random(12345).shuffle(examples)
        del TFRecordWriter.records[:]
        writer = run_squad.FeatureWriter(filename=os.path.join(tmp, "train.tf_record"), is_training=True)
        run_squad.convert_examples_to_features(
            examples=examples, tokenizer=tokenizer, max_seq_length=seq, doc_stride=stride,
            max_query_length=query, is_training=True, output_fn=writer.process_feature)
        writer.close()
        train.append({"fixture": name, "version_2_with_negative": v2, "max_seq_length": seq, "doc_stride": stride,
                      "max_query_length": query, "num_examples": len(examples),
                      "records": [r.hex() for r in TFRecordWriter.records]})
    json.dump({"generator": "tests/reference/squad_predictions_reference.py", "python": sys.version.split()[0],
               "predictions": runs, "train_records": train}, sys.stdout, ensure_ascii=True, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
