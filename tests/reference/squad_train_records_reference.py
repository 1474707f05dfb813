#!/usr/bin/env python3
"""run_squad.py main()'s train.tf_record for tests/test_run_squad.c (developer tool).

What main() does with --do_train, with run_squad.py's own functions unchanged:
read_squad_examples(train_file, is_training=True); rng = random.Random(12345);
rng.shuffle(train_examples); convert_examples_to_features(...) into FeatureWriter. The
protobuf and TFRecord stand-ins are squad_features_reference.py's (deterministic
serialization, docs/squad.md §7.4).

usage: /tmp/squadref/bin/python tests/reference/squad_train_records_reference.py /tmp/bert-ref \
           tests/data tests/data/squad/windows_v2_train_64_16_12.tf_record
"""
import os
import random
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import squad_features_reference as ref  # noqa: E402
from squad_read_reference import _make_tensorflow  # noqa: E402


def main():
    bert_dir, data_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    tf = _make_tensorflow([])
    tf.train.Example, tf.train.Features, tf.train.Feature, tf.train.Int64List = (
        ref.Example, ref.Features, ref.Feature, ref.Int64List)
    tf.python_io = types.SimpleNamespace(TFRecordWriter=ref.TFRecordWriter)
    sys.modules["tensorflow"] = tf
    sys.path.insert(0, bert_dir)
    import run_squad  # noqa: E402  (the reference, unchanged)
    import tokenization  # noqa: E402

    run_squad.FLAGS.version_2_with_negative = True
    tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(data_dir, "vocab_uncased.txt"), do_lower_case=True)
    train_examples = run_squad.read_squad_examples(os.path.join(data_dir, "squad", "windows_v2.json"), True)
    rng = random.Random(12345)
    rng.shuffle(train_examples)
    writer = run_squad.FeatureWriter(filename=out, is_training=True)
    run_squad.convert_examples_to_features(examples=train_examples, tokenizer=tokenizer, max_seq_length=64,
                                           doc_stride=16, max_query_length=12, is_training=True,
                                           output_fn=writer.process_feature)
    writer.close()
    print("%d examples, %d features" % (len(train_examples), writer.num_features))


if __name__ == "__main__":
    main()
