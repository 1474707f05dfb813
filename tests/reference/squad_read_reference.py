#!/usr/bin/env python3
"""Golden examples for est_squad_read_examples (developer tool; `make test` does not run it).

Runs google-research/bert's run_squad.py `read_squad_examples`, unchanged, imported from a
checkout of that repository, on each fixture of tests/data/squad/ in each mode (training as
SQuAD 1.1, training as 2.0 with --version_2_with_negative, prediction), and writes one JSON
document: per run the fixture, the mode, the warnings logged ("Could not find answer: ..."),
and either the examples or the exception the function raised.

The only stand-ins are for what run_squad.py imports and read_squad_examples does not use:
a module `tensorflow` with tf.flags (DEFINE_* setting attributes of FLAGS), tf.gfile.Open
(= open), tf.logging (records warnings) and tf.train.Optimizer (a plain class, so
optimization.py's class statement runs). modeling.py, optimization.py and tokenization.py
are the repository's own and need numpy and six.

usage: python tests/reference/squad_read_reference.py BERT_CHECKOUT tests/data/squad \
           > tests/data/squad/read_golden.json
"""
import json
import os
import sys
import types


class _Flags(object):
    pass


def _make_tensorflow(warnings):
    tf = types.ModuleType("tensorflow")
    flags = types.ModuleType("tensorflow.flags")
    flags.FLAGS = _Flags()

    def define(name, default, *args, **kwargs):
        setattr(flags.FLAGS, name, default)

    for kind in ("string", "bool", "integer", "float"):
        setattr(flags, "DEFINE_" + kind, define)
    flags.mark_flag_as_required = lambda name: None
    tf.flags = flags
    tf.gfile = types.SimpleNamespace(Open=open, GFile=open)

    def warning(msg, *args):
        warnings.append(msg % args if args else msg)

    tf.logging = types.SimpleNamespace(warning=warning, info=lambda *a, **k: None,
                                       set_verbosity=lambda v: None, INFO=20)
    tf.train = types.SimpleNamespace(Optimizer=object)
    return tf


FIXTURES = [
    "edge_v1.json", "edge_v1_escaped.json", "edge_v2.json",
    "allennlp_squad.json", "allennlp_squad2.json",
    "err_two_answers.json", "err_offset_past_end.json", "err_answer_past_end.json",
    "err_v2_no_is_impossible.json", "err_v2_impossible_no_answers.json",
]
MODES = [("train_v1", True, False), ("train_v2", True, True), ("predict", False, False)]


def main():
    bert_dir, fixture_dir = sys.argv[1], sys.argv[2]
    warnings = []
    sys.modules["tensorflow"] = _make_tensorflow(warnings)
    sys.path.insert(0, bert_dir)
    import run_squad  # noqa: E402  (the reference, unchanged)

    runs = []
    for name in FIXTURES:
        for mode, is_training, v2 in MODES:
            del warnings[:]
            run_squad.FLAGS.version_2_with_negative = v2
            run = {"fixture": name, "mode": mode}
            try:
                examples = run_squad.read_squad_examples(os.path.join(fixture_dir, name), is_training)
                run["examples"] = [{
                    "qas_id": e.qas_id, "question_text": e.question_text, "doc_tokens": e.doc_tokens,
                    "orig_answer_text": e.orig_answer_text, "start_position": e.start_position,
                    "end_position": e.end_position, "is_impossible": e.is_impossible,
                } for e in examples]
            except Exception as exc:  # the reference's own failure, recorded as the golden
                run["error"] = "%s: %s" % (type(exc).__name__, exc)
            run["warnings"] = list(warnings)
            runs.append(run)
    json.dump({"generator": "tests/reference/squad_read_reference.py", "python": sys.version.split()[0],
               "runs": runs}, sys.stdout, ensure_ascii=True, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
