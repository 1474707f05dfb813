#!/usr/bin/env python3
"""Golden SQuAD features for est_squad_convert_examples (developer tool; `make test` does not run it).

Runs google-research/bert's run_squad.py, unchanged, imported from a checkout of that
repository: read_squad_examples, then convert_examples_to_features with FeatureWriter's
process_feature as output_fn (the way run_squad.py's main() wires them), on fixtures of
tests/data/squad/ with the uncased vocab of tests/data, in each mode (training as SQuAD 1.1,
training as 2.0 with --version_2_with_negative, prediction) and with small window settings so
that examples span several windows. It writes one JSON document: per run the fixture, the
mode, the settings, and either every feature (all InputFeatures fields, the two maps as
their first key "doc_offset" and their values in key order, plus the serialized
tf.train.Example the writer wrote, as hex; input_ids, input_mask and segment_ids are left to
that record, which holds them) or the exception the reference raised.

Stand-ins, for what run_squad.py imports and these functions touch:
- a module `tensorflow` with tf.flags, tf.gfile, tf.logging (info lines recorded, and kept
  in the golden as "log" for the runs of LOG_RUNS) and
  tf.train.Optimizer as squad_read_reference.py has them;
- tf.train.Example / Features / Feature / Int64List whose SerializeToString() writes the
  protobuf wire format of TF's example.proto as TF's C++ protobuf does with deterministic
  serialization: Features' map entries sorted by key, each entry key (1) then value (2), the
  Feature's int64_list (3) holding its values packed (field 1, varints, negatives as 10-byte
  two's complement). run_squad.py calls SerializeToString() without deterministic=True, which
  in protobuf walks a hash map (docs/example.md §2): that order is not reproducible, and est
  writes (like this stand-in) the sorted, deterministic order;
- tf.python_io.TFRecordWriter framing each record (length, masked crc32c of the length,
  payload, masked crc32c of the payload).

usage: /tmp/squadref/bin/python tests/reference/squad_features_reference.py /tmp/bert-ref \
           tests/data > tests/data/squad/features_golden.json
"""
import json
import os
import struct
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from squad_read_reference import _make_tensorflow  # noqa: E402


# ---- protobuf wire format, deterministic (sorted map keys) ----------------------------

def _varint(v):
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number, payload):  # length-delimited field
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


class Int64List(object):
    def __init__(self, value=()):
        self.value = [int(v) for v in value]

    def SerializeToString(self):
        if not self.value:
            return b""
        return _field(1, b"".join(_varint(v) for v in self.value))


class Feature(object):
    def __init__(self, int64_list=None):
        self.int64_list = int64_list

    def SerializeToString(self):
        return _field(3, self.int64_list.SerializeToString()) if self.int64_list is not None else b""


class Features(object):
    def __init__(self, feature=None):
        self.feature = dict(feature or {})

    def SerializeToString(self):
        out = b""
        for key in sorted(self.feature, key=lambda k: k.encode("utf-8")):
            out += _field(1, _field(1, key.encode("utf-8")) + _field(2, self.feature[key].SerializeToString()))
        return out


class Example(object):
    def __init__(self, features=None):
        self.features = features

    def SerializeToString(self):
        return _field(1, self.features.SerializeToString()) if self.features is not None else b""


# ---- TFRecord framing ------------------------------------------------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def _masked_crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordWriter(object):
    records = []  # every payload written, for the golden

    def __init__(self, filename):
        self._f = open(filename, "wb")

    def write(self, payload):
        TFRecordWriter.records.append(payload)
        length = struct.pack("<Q", len(payload))
        self._f.write(length + struct.pack("<I", _masked_crc32c(length)) + payload +
                      struct.pack("<I", _masked_crc32c(payload)))

    def close(self):
        self._f.close()


FIXTURES = ["windows_v1.json", "windows_v2.json", "edge_v1.json", "edge_v2.json", "allennlp_squad.json",
            "allennlp_squad2.json"]
MODES = [("train_v1", True, False), ("train_v2", True, True), ("predict", False, False)]
# (max_seq_length, doc_stride, max_query_length): several windows per paragraph, short
# windows and a stride larger than a window's doc part.
SETTINGS = [(64, 16, 12), (32, 24, 6)]
# Runs whose tf.logging.info lines (the features of the first 20 examples) the golden keeps.
LOG_RUNS = [("windows_v2.json", "train_v2", 32), ("windows_v1.json", "predict", 32), ("edge_v2.json", "train_v2", 32)]


def doc_offset(f):
    """Both maps' keys are the window's positions in the feature, consecutive from
    len(query) + 2: the golden keeps the first key and the values in key order."""
    first = len(f.tokens) - 1 - len(f.token_to_orig_map)
    keys = list(range(first, len(f.tokens) - 1))
    assert list(f.token_to_orig_map) == keys and list(f.token_is_max_context) == keys
    return first


def import_reference(bert_dir, infos):
    """run_squad.py and tokenization.py of the checkout, unchanged, imported over the stand-in
    `tensorflow` (tf.logging.info lines appended to infos, TF's Example classes and record
    writer as above)."""
    tf = _make_tensorflow([])
    tf.logging.info = lambda msg, *args: infos.append(msg % args if args else msg)
    tf.train.Example, tf.train.Features, tf.train.Feature, tf.train.Int64List = Example, Features, Feature, Int64List
    tf.python_io = types.SimpleNamespace(TFRecordWriter=TFRecordWriter)
    sys.modules["tensorflow"] = tf
    sys.path.insert(0, bert_dir)
    import run_squad  # noqa: E402  (the reference, unchanged)
    import tokenization  # noqa: E402
    return run_squad, tokenization


def main():
    bert_dir, data_dir = sys.argv[1], sys.argv[2]
    infos = []
    run_squad, tokenization = import_reference(bert_dir, infos)

    tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(data_dir, "vocab_uncased.txt"),
                                           do_lower_case=True)
    out_file = "/tmp/squad_features_reference.tf_record"
    runs = []
    for name in FIXTURES:
        for mode, is_training, v2 in MODES:
            for max_seq_length, doc_stride, max_query_length in SETTINGS:
                run_squad.FLAGS.version_2_with_negative = v2
                run = {"fixture": name, "mode": mode, "max_seq_length": max_seq_length,
                       "doc_stride": doc_stride, "max_query_length": max_query_length}
                try:
                    examples = run_squad.read_squad_examples(os.path.join(data_dir, "squad", name), is_training)
                except Exception as exc:  # a fixture this mode refuses: tests/test_squad_read.c has it
                    continue
                features = []
                del infos[:]
                del TFRecordWriter.records[:]
                writer = run_squad.FeatureWriter(filename=out_file, is_training=is_training)

                def output_fn(f):
                    features.append(f)
                    writer.process_feature(f)

                try:
                    run_squad.convert_examples_to_features(
                        examples=examples, tokenizer=tokenizer, max_seq_length=max_seq_length,
                        doc_stride=doc_stride, max_query_length=max_query_length, is_training=is_training,
                        output_fn=output_fn)
                    writer.close()
                except Exception as exc:
                    run["error"] = "%s: %s" % (type(exc).__name__, exc)
                run["num_examples"] = len(examples)
                run["features"] = [{
                    "unique_id": f.unique_id, "example_index": f.example_index,
                    "doc_span_index": f.doc_span_index, "tokens": f.tokens,
                    "doc_offset": doc_offset(f), "token_to_orig_map": list(f.token_to_orig_map.values()),
                    "token_is_max_context": "".join("1" if v else "0" for v in f.token_is_max_context.values()),
                    "start_position": f.start_position, "end_position": f.end_position,
                    "is_impossible": f.is_impossible, "record": rec.hex(),
                } for f, rec in zip(features, TFRecordWriter.records)]
                if (name, mode, max_seq_length) in LOG_RUNS:
                    run["log"] = list(infos)
                runs.append(run)
    json.dump({"generator": "tests/reference/squad_features_reference.py", "python": sys.version.split()[0],
               "runs": runs}, sys.stdout, ensure_ascii=True, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
