"""est reads what TensorFlow writes: records of every compression and Examples of every
kind through `est tfrecord dump`; tf.compat.v1.train.Saver checkpoints of every dtype,
sharded and partitioned, and TF2 object-based checkpoints through `est ckpt ls/get`."""
import base64
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import est, est_ckpt_get, est_ckpt_ls, est_json_lines

v1 = tf.compat.v1
I64 = np.iinfo(np.int64)


def feature(kind, values):
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Feature()  # no kind set


def example(**features):
    return tf.train.Example(features=tf.train.Features(feature={k: feature(*v) for k, v in features.items()}))


def every_kind_of_example():
    """Examples TF's protobuf serializes: edge values of each list kind."""
    rng = np.random.default_rng(5)
    f32 = np.float32
    yield example()  # no features at all
    yield example(e_i=("int64", []), e_f=("float", []), e_b=("bytes", []), none=(None, None))
    yield example(i=("int64", [I64.min, I64.max, -1, 0, 1, -(2**31), 2**32, 2**53 + 1]))
    yield example(f=("float", [float("nan"), float("inf"), float("-inf"), -0.0, 1e-45, 3.4028235e38,
                               -1.17549435e-38, f32(1) / f32(3)]))
    yield example(b=("bytes", [b"", b"\x00", bytes(range(256)), b"\xff\xfe not utf-8", "crème brûlée".encode()]))
    yield example(long=("bytes", [bytes(rng.integers(0, 256, 1 << 20, dtype=np.uint8))]))  # 1 MiB value
    yield example(many=("float", rng.standard_normal(100000).astype(np.float32).tolist()))
    yield example(**{f"k{i:03d}": ("int64", rng.integers(-(2**62), 2**62, rng.integers(0, 5)).tolist()) for i in range(200)})
    yield example(**{"": ("int64", [1]), "ключ/with spaces": ("bytes", [b"v"]), "\x01": ("float", [2.5])})
    for _ in range(40):  # random mixtures
        feats = {}
        for j in range(rng.integers(0, 6)):
            kind = ["int64", "float", "bytes", None][rng.integers(0, 4)]
            n = int(rng.integers(0, 7))
            vals = (rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True).tolist() if kind == "int64"
                    else rng.standard_normal(n).astype(np.float32).tolist() if kind == "float"
                    else [bytes(rng.integers(0, 256, rng.integers(0, 20), dtype=np.uint8)) for _ in range(n)])
            feats[f"f{j}"] = (kind, vals)
        yield example(**feats)


def same_float(a, b):
    a, b = np.float32(a), np.float32(b)
    return (math.isnan(a) and math.isnan(b)) or a.view(np.uint32) == b.view(np.uint32)


def assert_dump_equals_proto(dumped, ex):
    fmap = ex.features.feature
    assert sorted(dumped) == sorted(fmap)
    for key, f in fmap.items():
        kind = f.WhichOneof("kind")
        got = dumped[key]
        if kind is None:
            assert got == {}, key
            continue
        name = {"int64_list": "int64", "float_list": "float", "bytes_list": "bytes"}[kind]
        assert list(got) == [name], key
        want = list(getattr(f, kind).value)
        if name == "bytes":
            assert [base64.b64decode(v) for v in got[name]] == want, key
        elif name == "float":
            assert len(got[name]) == len(want) and all(same_float(a, b) for a, b in zip(got[name], want)), key
        else:
            assert got[name] == want, key


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_records_tf_writes_dump_in_est_as_tf_parses(tmp_path, compression):
    path = str(tmp_path / "tf.tf_record")
    examples = list(every_kind_of_example())
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression)) as w:
        for ex in examples:
            w.write(ex.SerializeToString())
    assert est("tfrecord", "count", path, f"--compression={compression}").strip() == str(len(examples))
    dumped = est_json_lines("tfrecord", "dump", path, f"--compression={compression}")
    assert len(dumped) == len(examples)
    # TF's own reading of what it wrote: TFRecordDataset, then protobuf's parser
    read_back = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path, compression)]
    for d, ex in zip(dumped, read_back):
        assert_dump_equals_proto(d, ex)


# ---- checkpoints ----------------------------------------------------------------------

def values_of_dtype(dtype, shape, rng):
    n = int(np.prod(shape))
    if dtype == tf.string:
        pool = [b"", b"a", "ü".encode(), b"\xff\x00bin", b"x" * 1000]
        return np.array([pool[i % len(pool)] for i in range(n)], dtype=object).reshape(shape)
    if dtype == tf.bool:
        return rng.integers(0, 2, shape).astype(bool)
    np_t = dtype.as_numpy_dtype
    if dtype.is_floating:
        v = (rng.standard_normal(shape) * 100).astype(np_t)
        flat = v.reshape(-1)
        specials = [np.nan, np.inf, -np.inf, -0.0]
        flat[: min(n, 4)] = specials[: min(n, 4)]
        return v
    info = np.iinfo(np_t)
    v = rng.integers(info.min, info.max, shape, dtype=np_t, endpoint=True)
    flat = v.reshape(-1)
    flat[: min(n, 2)] = [info.min, info.max][: min(n, 2)]
    return v


DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
          tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool, tf.string]
EST_DTYPE_NAMES = {"bfloat16": "bfloat16", "string": "string"}


def est_values_as_numpy(got, dtype):
    if dtype == tf.string:
        return [base64.b64decode(v["base64"]) if isinstance(v, dict) else v.encode() for v in got]
    return np.asarray(got, dtype=np.float64 if dtype.is_floating else object)


def assert_est_reads(prefix, expected):
    """expected: {name: numpy array} of what TF saved; est ckpt ls/get must agree."""
    listed = est_ckpt_ls(prefix)
    reader = tf.train.load_checkpoint(prefix)
    tf_dtypes = reader.get_variable_to_dtype_map()
    assert set(listed) == set(tf_dtypes)
    for name, want in expected.items():
        dtype = tf_dtypes[name]
        assert listed[name] == (dtype.name, list(np.shape(want))), name
        got = est_ckpt_get(prefix, name)
        flat = np.asarray(want).reshape(-1)
        if dtype == tf.string:
            assert est_values_as_numpy(got, dtype) == list(flat), name
        elif dtype.is_floating:
            # %.9g (%.17g for float64) round-trips the stored dtype: compare in that dtype
            w = flat
            g = np.asarray(got, dtype=np.float64).astype(flat.dtype)
            assert g.shape == w.shape and np.array_equal(g, w, equal_nan=True), name
            assert np.array_equal(np.signbit(g), np.signbit(w)), name  # -0.0 kept
        elif dtype == tf.bool:
            assert got == flat.tolist(), name
        else:
            assert [int(x) for x in got] == [int(x) for x in flat], name


def save_v1(prefix, variables, sharded=False, devices=1):
    """variables: {name: (numpy value, device index)}; TF1's Saver writes them."""
    g = tf.Graph()
    with g.as_default():
        vs = []
        for name, (value, dev) in variables.items():
            with tf.device(f"/cpu:{dev}"):
                vs.append(v1.Variable(value, name=name, dtype=tf.as_dtype(value.dtype) if value.dtype != object else tf.string))
        saver = v1.train.Saver(vs, sharded=sharded)
        cfg = v1.ConfigProto(device_count={"CPU": devices}, allow_soft_placement=False)
        with v1.Session(graph=g, config=cfg) as sess:
            sess.run(v1.global_variables_initializer())
            return saver.save(sess, prefix, write_meta_graph=False, write_state=False)


def test_saver_checkpoint_of_every_dtype(tmp_path):
    rng = np.random.default_rng(11)
    variables, expected = {}, {}
    for i, dtype in enumerate(DTYPES):
        for shape in ([], [7], [2, 3, 4], [0]):
            if dtype == tf.bfloat16:
                import ml_dtypes  # numpy has no bfloat16; TF's own dependency provides it
                v = values_of_dtype(tf.float32, shape, rng).astype(ml_dtypes.bfloat16)
            else:
                v = values_of_dtype(dtype, shape, rng)
            name = f"{dtype.name}/shape_{'x'.join(map(str, shape)) or 'scalar'}"
            variables[name] = (np.asarray(v), 0)
            expected[name] = np.asarray(v)
    prefix = save_v1(str(tmp_path / "model.ckpt"), variables)
    assert_est_reads(prefix, expected)


def test_sharded_saver_checkpoint(tmp_path):
    rng = np.random.default_rng(12)
    variables = {f"layer_{i}/w": (rng.standard_normal([3, 5]).astype(np.float32), i % 3) for i in range(7)}
    variables["step"] = (np.int64(42), 1)
    variables["names"] = (np.array([b"one", b"two"], dtype=object), 2)
    prefix = save_v1(str(tmp_path / "model.ckpt"), variables, sharded=True, devices=3)
    data_files = sorted(f for f in os.listdir(tmp_path) if ".data-" in f)
    assert len(data_files) == 3, data_files  # one data file per device
    assert_est_reads(prefix, {k: v for k, (v, _) in variables.items()})


def test_partitioned_variables(tmp_path):
    rng = np.random.default_rng(13)
    full = {"emb": rng.standard_normal([10, 4]).astype(np.float32),
            "ids": rng.integers(-100, 100, [9, 2, 3]).astype(np.int64),
            "col": rng.standard_normal([3, 8]).astype(np.float64)}
    g = tf.Graph()
    with g.as_default():
        def init_from(value):  # each partition gets its slice of the full value
            def init(shape, dtype=None, partition_info=None):
                off = partition_info.var_offset if partition_info else [0] * len(shape)
                return value[tuple(slice(o, o + n) for o, n in zip(off, shape))]
            return init

        for name, parts, axis in (("emb", 3, 0), ("ids", 4, 0), ("col", 3, 1)):
            v1.get_variable(name, shape=full[name].shape, dtype=tf.as_dtype(full[name].dtype),
                            initializer=init_from(full[name]), partitioner=v1.fixed_size_partitioner(parts, axis=axis))
        saver = v1.train.Saver()
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            prefix = saver.save(sess, str(tmp_path / "model.ckpt"), write_meta_graph=False, write_state=False)
    assert sorted(n for n, _ in tf.train.list_variables(prefix)) == ["col", "emb", "ids"]
    assert_est_reads(prefix, full)


def test_tf2_object_based_checkpoint(tmp_path):
    rng = np.random.default_rng(14)
    dense = tf.keras.layers.Dense(3)
    dense.build([None, 5])
    step = tf.Variable(7, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(model=dense, step=step, half=tf.Variable(rng.standard_normal(4).astype(np.float16)),
                               opt=tf.keras.optimizers.Adam())
    path = ckpt.write(str(tmp_path / "ckpt"))
    names = dict(tf.train.list_variables(path))
    assert "_CHECKPOINTABLE_OBJECT_GRAPH" in names and "model/kernel/.ATTRIBUTES/VARIABLE_VALUE" in names
    reader = tf.train.load_checkpoint(path)
    expected = {n: reader.get_tensor(n) for n in names}
    # the object graph is a serialized proto in a string scalar; est gives its exact bytes
    og = est_ckpt_get(path, "_CHECKPOINTABLE_OBJECT_GRAPH")
    assert est_values_as_numpy(og, tf.string) == [expected.pop("_CHECKPOINTABLE_OBJECT_GRAPH")]
    assert_est_reads(path, expected)
