"""est.checkpoint.load(path): every tensor of a TensorFlow checkpoint or a safetensors file as
numpy arrays (est/ckpt.h, est/safetensors.h)."""
import ctypes
import os

import numpy as np

from . import _lib

# est_dtype (est/tensor.h) -> numpy; bfloat16 (no numpy type) is widened to float32, exactly
_DTYPES = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8, 9: np.int64,
           10: np.bool_, 17: np.uint16, 19: np.float16, 22: np.uint32, 23: np.uint64}
_STRING, _BFLOAT16 = 7, 14


def _array(t):
    shape = tuple(t.dims[i] for i in range(t.rank))
    n = int(np.prod(shape)) if shape else 1
    if t.dtype == _STRING:
        items = ctypes.cast(t.data, ctypes.POINTER(_lib.Bytes))
        flat = [ctypes.string_at(items[i].data, items[i].size) for i in range(n)]
        return np.array(flat, dtype=object).reshape(shape)
    if t.dtype == _BFLOAT16:
        raw = np.frombuffer(ctypes.string_at(t.data, 2 * n), dtype=np.uint16)
        return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)
    dt = _DTYPES.get(t.dtype)
    if dt is None:
        raise _lib.UnimplementedError(f"dtype {t.dtype}: no numpy type")
    size = n * np.dtype(dt).itemsize
    return np.frombuffer(ctypes.string_at(t.data, size), dtype=dt).reshape(shape).copy()


def _is_safetensors(path):
    return path.endswith(".safetensors") and os.path.isfile(path)


def load(path):
    """{name: numpy array} of every tensor. path: a safetensors file, a TF checkpoint prefix
    (model.ckpt-1000, beside its .index), or a directory: its model.safetensors (a HuggingFace
    directory), else its latest checkpoint (the `checkpoint` state file, as
    tf.train.latest_checkpoint). bfloat16 tensors come back as float32 (exact)."""
    p = os.fsdecode(_lib.fspath(path))
    if os.path.isdir(p):
        st = os.path.join(p, "model.safetensors")
        if os.path.isfile(st):
            p = st
        else:
            buf = ctypes.create_string_buffer(4096)
            _lib.check(_lib.est_ckpt_latest(os.fsencode(p), buf, len(buf)), f"{p}: no model.safetensors")
            p = os.fsdecode(buf.value)
    if _is_safetensors(p):
        return _read(p, _lib.est_safetensors_open, _lib.est_safetensors_count, _lib.est_safetensors_name,
                     _lib.est_safetensors_read, _lib.est_safetensors_close)
    return _read(p, _lib.est_ckpt_reader_open, _lib.est_ckpt_reader_count, _lib.est_ckpt_reader_name,
                 _lib.est_ckpt_reader_read, _lib.est_ckpt_reader_close)


def _read(p, open_, count, name, read, close):
    h = ctypes.c_void_p()
    _lib.check(open_(ctypes.byref(h), os.fsencode(p)))
    try:
        out = {}
        for i in range(count(h)):
            key = name(h, i)
            t = _lib.Tensor()
            _lib.check(read(h, key, ctypes.byref(t)))
            try:
                out[key.decode("utf-8")] = _array(t)
            finally:
                _lib.est_tensor_free(ctypes.byref(t))
        return out
    finally:
        close(h)
