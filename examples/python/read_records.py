"""TFRecords and tf.train.Example without TensorFlow: write, read, parse; then a checkpoint's
tensors as numpy arrays (docs/python.md §7).

    python examples/python/read_records.py [FILE.tf_record] [CHECKPOINT]"""
import os
import sys
import tempfile

import est

# %% write a few Examples (deterministic bytes, as TF's SerializeToString(deterministic=True))
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "demo.tf_record")
if len(sys.argv) <= 1:
    with est.TFRecordWriter(path) as w:
        for i in range(3):
            w.write(est.serialize_example({"input_ids": [101, 2000 + i, 102], "label_ids": i % 2,
                                           "text": f"example {i}", "weight": [0.5 * i]}))

# %% read them back, every CRC checked; parse each into numpy arrays and bytes
with est.TFRecordReader(path) as records:
    for n, record in enumerate(records):
        ex = est.parse_example(record)
        print(n, {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in ex.items()})

# %% a checkpoint (TF prefix, directory or .safetensors) as {name: numpy array}
if len(sys.argv) > 2:
    tensors = est.checkpoint.load(sys.argv[2])
    for name, t in sorted(tensors.items())[:10]:
        print(f"{name:60s} {t.dtype} {t.shape}")
