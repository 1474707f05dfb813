"""TFRecord files and tf.train.Example, in the shapes tf.data users write: TFRecordReader (an
iterator of records, as tf.data.TFRecordDataset), TFRecordWriter (tf.io.TFRecordWriter),
parse_example and serialize_example (est/tfrecord.h, est/example.h)."""
import ctypes
import os

import numpy as np

from . import _lib

_KINDS = {1: "bytes", 2: "float", 3: "int64"}


def _compression(compression_type):
    c = ctypes.c_int()
    name = b"" if compression_type is None else str(compression_type).encode()
    _lib.check(_lib.est_compression_parse(name, ctypes.byref(c)), "compression_type")
    return c.value


class TFRecordReader:
    """Records of a TFRecord file, each as bytes, every CRC checked:

        with est.TFRecordReader("train.tf_record") as records:
            for record in records:
                example = est.parse_example(record)

    compression_type: None / "" , "ZLIB" or "GZIP". A truncated or corrupted record raises
    est.DataLossError naming the file and offset."""

    def __init__(self, path, compression_type=None):
        self.path = os.fsdecode(_lib.fspath(path))
        self._h = ctypes.c_void_p()
        _lib.check(_lib.est_tfrecord_reader_open(ctypes.byref(self._h), os.fsencode(self.path),
                                                 _compression(compression_type)))

    def __iter__(self):
        return self

    def __next__(self):
        if not self._h:
            raise ValueError("est.TFRecordReader: read after close()")
        data, size = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t()
        st = _lib.est_tfrecord_reader_next(self._h, ctypes.byref(data), ctypes.byref(size))
        if st == 3:  # OUT_OF_RANGE: the clean end of the file
            raise StopIteration
        _lib.check(st)
        return ctypes.string_at(data, size.value)

    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.est_tfrecord_reader_close(h)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TFRecordWriter:
    """tf.io.TFRecordWriter: write(record) appends bytes; close() (or leaving the with block)
    makes the file appear whole (est writes a temporary file and renames it). Leaving the block
    by an exception leaves no file."""

    def __init__(self, path, compression_type=None):
        self.path = os.fsdecode(_lib.fspath(path))
        self._h = ctypes.c_void_p()
        _lib.check(_lib.est_tfrecord_writer_open(ctypes.byref(self._h), os.fsencode(self.path),
                                                 _compression(compression_type)))

    def write(self, record):
        if not self._h:
            raise ValueError("est.TFRecordWriter: write after close()")
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(f"record: expected bytes, got {type(record).__name__}")
        b = bytes(record)
        _lib.check(_lib.est_tfrecord_writer_write(self._h, b, len(b)))

    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.check(_lib.est_tfrecord_writer_close(h))

    def abort(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.est_tfrecord_writer_abort(h)

    def __del__(self):
        self.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def parse_example(serialized):
    """A serialized tf.train.Example -> {key: value}: int64 lists as numpy int64 arrays, float
    lists as float32 arrays, bytes lists as lists of bytes, a feature with no list as None.
    Malformed input raises est.InvalidArgumentError with TF's text."""
    if not isinstance(serialized, (bytes, bytearray, memoryview)):
        raise TypeError(f"serialized: expected bytes, got {type(serialized).__name__}")
    b = bytes(serialized)
    ex = _lib.Example()
    _lib.est_example_init(ctypes.byref(ex))
    try:
        _lib.check(_lib.est_example_parse(ctypes.byref(ex), b, len(b)))
        out = {}
        for i in range(ex.count):
            f = ex.features[i]
            key = ctypes.string_at(f.key, f.key_size).decode("utf-8", "surrogateescape")
            kind = _KINDS.get(f.kind)
            if kind == "int64":
                out[key] = np.ctypeslib.as_array(f.int64s, (f.count,)).copy() if f.count else np.zeros(0, np.int64)
            elif kind == "float":
                out[key] = np.ctypeslib.as_array(f.floats, (f.count,)).copy() if f.count else np.zeros(0, np.float32)
            elif kind == "bytes":
                out[key] = [ctypes.string_at(f.bytes[j].data, f.bytes[j].size) for j in range(f.count)]
            else:
                out[key] = None
        return out
    finally:
        _lib.est_example_clear(ctypes.byref(ex))


def serialize_example(features):
    """{key: values} -> a serialized tf.train.Example (deterministic, keys sorted): ints as an
    int64 list, floats as a float list, bytes / str (UTF-8) as a bytes list; a scalar is a
    list of one."""
    ex = _lib.Example()
    _lib.est_example_init(ctypes.byref(ex))
    try:
        for key, value in features.items():
            if not isinstance(key, str):
                raise TypeError(f"feature key {key!r}: expected a str")
            k = key.encode("utf-8")
            vals = [value] if isinstance(value, (int, float, str, bytes, np.generic)) else list(value)
            if vals and all(isinstance(v, (bytes, str)) for v in vals):
                enc = [v.encode("utf-8") if isinstance(v, str) else v for v in vals]
                arr = (_lib.Bytes * len(enc))()
                bufs = [ctypes.create_string_buffer(v, len(v)) for v in enc]
                for j, v in enumerate(enc):
                    arr[j].size, arr[j].data = len(v), ctypes.cast(bufs[j], ctypes.POINTER(ctypes.c_uint8))
                st = _lib.est_example_set_bytes(ctypes.byref(ex), k, arr, len(enc))
            else:
                a = np.asarray(vals)
                if a.size and a.dtype.kind in "iub":
                    a = np.ascontiguousarray(a, dtype=np.int64)
                    st = _lib.est_example_set_int64(ctypes.byref(ex), k, a.ctypes.data, a.size)
                elif a.size == 0 or a.dtype.kind == "f":
                    a = np.ascontiguousarray(a, dtype=np.float32)
                    st = _lib.est_example_set_float(ctypes.byref(ex), k, a.ctypes.data, a.size)
                else:
                    raise TypeError(f"feature {key!r}: values must be ints, floats, or bytes/str, got {a.dtype}")
            _lib.check(st, f"feature {key!r}")
        out, size = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(_lib.est_example_serialize(ctypes.byref(ex), ctypes.byref(out), ctypes.byref(size)))
        try:
            return ctypes.string_at(out, size.value)
        finally:
            _lib.libc_free(out)
    finally:
        _lib.est_example_clear(ctypes.byref(ex))
