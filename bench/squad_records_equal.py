"""Whether two TFRecord files of SQuAD features hold the same records: same count, and record
for record the same features with the same int64 values (parsed: TF's writer orders an
Example's map by hash, est by key, docs/example.md §2). Run with .venv-interop's python.

  squad_records_equal.py A.tf_record B.tf_record     -> "equal N records" (exit 0) or the first difference (exit 1)
"""
import sys

import tensorflow as tf


def records(path):
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        ex = tf.train.Example.FromString(raw)
        yield {k: list(v.int64_list.value) for k, v in ex.features.feature.items()}


def main():
    a, b = list(records(sys.argv[1])), list(records(sys.argv[2]))
    if len(a) != len(b):
        print(f"DIFFERENT: {len(a)} vs {len(b)} records")
        return 1
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            print(f"DIFFERENT: record {i}, features {keys}")
            return 1
    print(f"equal {len(a)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
