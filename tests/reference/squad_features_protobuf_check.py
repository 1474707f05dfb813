#!/usr/bin/env python3
"""Checks squad_features_reference.py's stand-in for tf.train.Example against real protobuf
(developer tool; `make test` does not run it).

Builds TF's example.proto messages (Int64List, Feature, Features with its map, Example) from a
descriptor, parses every record of tests/data/squad/features_golden.json and checks that
SerializeToString(deterministic=True) gives the same bytes back, and that the unique id is the
golden's. Then prints the map order that a plain SerializeToString() (what run_squad.py
calls) gives for FeatureWriter's seven keys: with protobuf's upb implementation it changes
from run to run (docs/squad.md §7.4).

usage: /tmp/squadref/bin/pip install protobuf
       /tmp/squadref/bin/python tests/reference/squad_features_protobuf_check.py \
           tests/data/squad/features_golden.json
"""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal import api_implementation

KEYS = ["unique_ids", "input_ids", "input_mask", "segment_ids", "start_positions", "end_positions",
        "is_impossible"]


def example_class():
    """tensorflow.Example of TF's example.proto, int64 lists only."""
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="example.proto", package="tensorflow", syntax="proto3")
    m = fdp.message_type.add(name="Int64List")
    m.field.add(name="value", number=1, type=F.TYPE_INT64, label=F.LABEL_REPEATED).options.packed = True
    m = fdp.message_type.add(name="Feature")
    m.field.add(name="int64_list", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".tensorflow.Int64List")
    m = fdp.message_type.add(name="Features")
    entry = m.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorflow.Feature")
    m.field.add(name="feature", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                type_name=".tensorflow.Features.FeatureEntry")
    m = fdp.message_type.add(name="Example")
    m.field.add(name="features", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                type_name=".tensorflow.Features")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


def _varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i


def wire_keys(b):
    """The Features map's keys in the order the bytes hold them."""
    _, i = _varint(b, 1)
    keys = []
    while i < len(b):
        n, i = _varint(b, i + 1)
        entry = b[i:i + n]
        i += n
        klen, j = _varint(entry, 1)
        keys.append(entry[j:j + klen].decode())
    return keys


def main():
    Example = example_class()
    golden = json.load(open(sys.argv[1]))
    n = 0
    for run in golden["runs"]:
        for f in run["features"]:
            rec = bytes.fromhex(f["record"])
            e = Example.FromString(rec)
            assert e.SerializeToString(deterministic=True) == rec, (run["fixture"], f["unique_id"])
            assert list(e.features.feature["unique_ids"].int64_list.value) == [f["unique_id"]]
            n += 1
    import google.protobuf
    print("%d records: equal to protobuf %s (%s) deterministic serialization"
          % (n, google.protobuf.__version__, api_implementation.Type()))
    e = Example()
    for k in KEYS:
        e.features.feature[k].int64_list.value.append(1)
    print("SerializeToString() map order this run:", " ".join(wire_keys(e.SerializeToString())))


if __name__ == "__main__":
    main()
