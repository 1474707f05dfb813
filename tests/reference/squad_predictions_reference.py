#!/usr/bin/env python3
"""Golden predictions for est_squad_predictions_write (developer tool; `make test` does not run it).

Runs google-research/bert's run_squad.py, unchanged, imported from a checkout of that
repository: read_squad_examples (prediction mode), convert_examples_to_features, then
write_predictions fed RawResults whose logits come from a fixed integer formula (logit_of
below; tests/test_squad_predictions.c computes the same floats), the way run_squad.py's
main() wires them. Each run records the three files write_predictions wrote
(predictions.json, nbest_predictions.json, null_odds.json for 2.0) as text, or the
exception it raised (2.0 with every n-best entry null: est answers "" there).

The logits are k / 128 - 8 for an integer k in [0, 2048): exact in float32, so Python's
float(np.float32(x)) and est's float agree, and ties occur (the candidates' order on ties
is checked too).

Stand-in for tensorflow: squad_read_reference.py's (tf.flags, tf.gfile = open, tf.logging).

usage: /tmp/squadref/bin/python tests/reference/squad_predictions_reference.py /tmp/bert-ref \
           tests/data > tests/data/squad/predictions_golden.json
"""
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from squad_read_reference import _make_tensorflow  # noqa: E402


def logit_of(unique_id, position, which):
    """which: 0 start, 1 end. Must equal tests/test_squad_predictions.c's logit_of."""
    h = (unique_id * 1000003 + position * 7919 + which * 104729 + 12345) % 8191
    return (h % 2048) / 128.0 - 8.0


# (fixture, version_2_with_negative, vocab, do_lower_case)
INPUTS = [
    ("windows_v1.json", False, "vocab_uncased.txt", True),
    ("windows_v2.json", True, "vocab_uncased.txt", True),
    ("edge_v1.json", False, "vocab_uncased.txt", True),
    ("edge_v1.json", False, "vocab_cased.txt", False),
    ("edge_v2.json", True, "vocab_uncased.txt", True),
    ("allennlp_squad.json", False, "vocab_uncased.txt", True),
    ("allennlp_squad2.json", True, "vocab_cased.txt", False),
]
# (max_seq_length, doc_stride, max_query_length, n_best_size, max_answer_length, threshold)
SETTINGS = [(64, 16, 12, 20, 30, 0.0), (32, 24, 6, 3, 4, 2.5), (48, 8, 8, 7, 12, -1.0)]


def main():
    bert_dir, data_dir = sys.argv[1], sys.argv[2]
    tf = _make_tensorflow([])
    sys.modules["tensorflow"] = tf
    sys.path.insert(0, bert_dir)
    import run_squad  # noqa: E402  (the reference, unchanged)
    import tokenization  # noqa: E402

    tmp = tempfile.mkdtemp()
    runs = []
    for name, v2, vocab, lower in INPUTS:
        tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(data_dir, vocab), do_lower_case=lower)
        for max_seq_length, doc_stride, max_query_length, n_best, max_answer, threshold in SETTINGS:
            run_squad.FLAGS.version_2_with_negative = v2
            run_squad.FLAGS.null_score_diff_threshold = threshold
            run_squad.FLAGS.verbose_logging = False
            examples = run_squad.read_squad_examples(os.path.join(data_dir, "squad", name), False)
            features = []
            run_squad.convert_examples_to_features(
                examples=examples, tokenizer=tokenizer, max_seq_length=max_seq_length, doc_stride=doc_stride,
                max_query_length=max_query_length, is_training=False, output_fn=features.append)
            results = [run_squad.RawResult(unique_id=f.unique_id,
                                           start_logits=[logit_of(f.unique_id, i, 0) for i in range(max_seq_length)],
                                           end_logits=[logit_of(f.unique_id, i, 1) for i in range(max_seq_length)])
                       for f in features]
            run = collections.OrderedDict([
                ("fixture", name), ("version_2_with_negative", v2), ("vocab", vocab), ("do_lower_case", lower),
                ("max_seq_length", max_seq_length), ("doc_stride", doc_stride),
                ("max_query_length", max_query_length), ("n_best_size", n_best),
                ("max_answer_length", max_answer), ("null_score_diff_threshold", threshold)])
            paths = [os.path.join(tmp, n) for n in ("predictions.json", "nbest_predictions.json", "null_odds.json")]
            for p in paths:
                if os.path.exists(p):
                    os.remove(p)
            try:
                run_squad.write_predictions(examples, features, results, n_best, max_answer, lower, *paths)
                for key, p in zip(("predictions", "nbest", "null_odds"), paths):
                    if os.path.exists(p):
                        with open(p, encoding="utf-8") as f:
                            run[key] = f.read()
            except Exception as exc:
                run["error"] = "%s: %s" % (type(exc).__name__, exc)
            runs.append(run)
    json.dump(runs, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
