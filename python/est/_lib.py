"""libest.so through ctypes: finding and loading it, the prototypes of the functions the package
calls, est's status codes as Python exceptions, and est's log lines through `logging`.

ctypes releases the GIL around every call into a CDLL (it only keeps it for PyDLL), so each
model, tokenizer or record call below runs without the GIL: other Python threads run while
est computes (docs/python.md §2)."""
import ctypes
import logging
import os
import subprocess
import sys

from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_float, c_int, c_int32, c_int64, c_size_t,
                    c_uint8, c_uint64, c_void_p)

CAPI_VERSION = 1

logger = logging.getLogger("est")


# ---- errors: est_status codes (est/status.h), named as TensorFlow names them -------------------

class EstError(Exception):
    """An est call failed; str(e) is est's message, e.status the code's name."""
    status = "UNKNOWN"


class InvalidArgumentError(EstError, ValueError):
    status = "INVALID_ARGUMENT"


class NotFoundError(EstError, LookupError):
    status = "NOT_FOUND"


class OutOfRangeError(EstError):
    status = "OUT_OF_RANGE"


class DataLossError(EstError):
    status = "DATA_LOSS"


class IOError_(EstError, OSError):
    status = "IO"


class ResourceExhaustedError(EstError, MemoryError):
    status = "NO_MEMORY"


class FailedPreconditionError(EstError):
    status = "FAILED_PRECONDITION"


class UnimplementedError(EstError, NotImplementedError):
    status = "UNIMPLEMENTED"


class AbortedError(EstError):
    status = "ABORTED"


class InternalError(EstError):
    status = "INTERNAL"


class CancelledError(EstError):
    status = "CANCELLED"


# in est_status order (EST_OK = 0 first)
_ERRORS = [None, InvalidArgumentError, NotFoundError, OutOfRangeError, DataLossError, IOError_,
           ResourceExhaustedError, FailedPreconditionError, UnimplementedError, AbortedError, InternalError,
           CancelledError]


# ---- finding libest.so -------------------------------------------------------------------

def _candidates():
    env = os.environ.get("EST_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libest.so")]
    # a source tree: python/est/_lib.py -> build/libest.so
    out.append(os.path.join(os.path.dirname(os.path.dirname(here)), "build", "libest.so"))
    import ctypes.util
    found = ctypes.util.find_library("est")
    if found:
        out.append(found)
    return out


def _library_path():
    tried = _candidates()
    for p in tried:
        if os.path.exists(p) or (not os.path.isabs(p) and p.startswith("libest")):
            return p
    if os.environ.get("EST_LIBRARY"):
        raise ImportError(f"est: EST_LIBRARY={os.environ['EST_LIBRARY']}: no such file")
    raise ImportError("est: libest.so not found (tried " + ", ".join(tried) + "); build it with `make python` "
                      "in the est repository, or point EST_LIBRARY at it")


def _tune_runtime(path):
    """What the `est` command line does before its math commands (tools/main.c): OpenBLAS and
    libgomp read OPENBLAS_CORETYPE and GOMP_SPINCOUNT only when they load, so they are set
    here, before libest.so (and its OpenBLAS and libgomp) loads. Which OpenBLAS core to name
    only a loaded OpenBLAS can say: a child process loads libest.so once and asks
    (est_blas_coretype_fix), and the answer is kept in the environment for child processes."""
    if not os.environ.get("GOMP_SPINCOUNT") and not os.environ.get("OMP_WAIT_POLICY"):
        os.environ["GOMP_SPINCOUNT"] = "1000"
    if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("EST_OPENBLAS_CHECKED"):
        return
    probe = ("import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); f = l.est_blas_coretype_fix; "
             "f.restype = ctypes.c_char_p; r = f(); print(r.decode() if r else '')")
    try:
        core = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True,
                              timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        core = ""
    os.environ["EST_OPENBLAS_CHECKED"] = "1"
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
        logger.info("OpenBLAS did not recognise this CPU; running with OPENBLAS_CORETYPE=%s", core)


path = _library_path()
_tune_runtime(path)
lib = ctypes.CDLL(path)


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


est_capi_version = _fn("est_capi_version", c_int)
if est_capi_version() != CAPI_VERSION:
    raise ImportError(f"est: {path} has C API version {est_capi_version()}, this package needs {CAPI_VERSION}; "
                      "rebuild it with `make python`")

est_error_message = _fn("est_error_message", c_char_p)
est_status_name = _fn("est_status_name", c_char_p, c_int)


def check(status, context=None):
    """Raises the exception of a non-zero est_status with est's message (read on this thread,
    where est keeps it)."""
    if status == 0:
        return
    msg = (est_error_message() or b"").decode("utf-8", "replace")
    if context:
        msg = f"{context}: {msg}"
    cls = _ERRORS[status] if 0 < status < len(_ERRORS) else EstError
    raise cls(msg)


# ---- logging ------------------------------------------------------------------------------

_LEVELS = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR]
LOG_FN = CFUNCTYPE(None, c_int, c_char_p)


def _on_log(level, line):
    logger.log(_LEVELS[level] if 0 <= level < 4 else logging.ERROR, "%s", line.decode("utf-8", "replace"))


_log_callback = LOG_FN(_on_log)  # kept alive for as long as the library may call it
_fn("est_capi_log_to", c_int, LOG_FN)(_log_callback)

# the command line's start-up (tools/main.c): OpenBLAS's own idle pool joined, est's default threads
_fn("est_blas_stop_threads", None)()
est_set_num_threads = _fn("est_set_num_threads", None, c_int)
est_set_num_threads(0)
est_default_num_threads = _fn("est_default_num_threads", c_int)


def threads_arg(threads):
    """threads= of a call: None (est's default: OMP_NUM_THREADS, else the CPUs this process may
    use) or a positive count."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads={threads!r}: must be None or a positive int")
    return threads


def precision_arg(precision):
    if precision is None:
        return None
    if precision not in ("fp32", "bf16", "int8"):
        raise ValueError(f"precision={precision!r}: must be 'fp32', 'bf16' or 'int8' (or None: the model's own)")
    return precision.encode()


def fspath(p, what="path"):
    try:
        return os.fsencode(os.fspath(p))
    except TypeError:
        raise TypeError(f"{what}: expected a str or os.PathLike, got {type(p).__name__}") from None


# ---- tokenizers --------------------------------------------------------------------------

class Encodings(Structure):
    _fields_ = [("count", c_size_t), ("start", POINTER(c_size_t)),
                ("ids", POINTER(c_int32)), ("type_ids", POINTER(c_int32)),
                ("special_tokens_mask", POINTER(c_int32)), ("attention_mask", POINTER(c_int32)),
                ("offset_start", POINTER(c_int32)), ("offset_end", POINTER(c_int32)),
                ("tokens", POINTER(c_char_p))]


est_capi_tokenizer_open = _fn("est_capi_tokenizer_open", c_int, POINTER(c_void_p), c_char_p)
est_capi_tokenizer_free = _fn("est_capi_tokenizer_free", None, c_void_p)
est_capi_encodings_free = _fn("est_capi_encodings_free", None, POINTER(Encodings))
est_capi_tokenizer_encode_batch = _fn(
    "est_capi_tokenizer_encode_batch", c_int, c_void_p, c_size_t, POINTER(c_char_p), POINTER(c_size_t),
    POINTER(c_char_p), POINTER(c_size_t), c_int, c_int, POINTER(POINTER(Encodings)))
est_capi_tokenizer_decode = _fn("est_capi_tokenizer_decode", c_int, c_void_p, POINTER(c_int32), c_size_t, c_int,
                                POINTER(c_void_p), POINTER(c_size_t))
est_capi_tokenizer_id_to_token = _fn("est_capi_tokenizer_id_to_token", c_char_p, c_void_p, c_int32)
libc_free = ctypes.CDLL(None).free
libc_free.restype, libc_free.argtypes = None, [c_void_p]

# ---- models ------------------------------------------------------------------------------

est_capi_embed_open = _fn("est_capi_embed_open", c_int, POINTER(c_void_p), c_char_p, c_char_p, c_int)
est_capi_embed = _fn("est_capi_embed", c_int, c_void_p, c_size_t, POINTER(c_char_p), POINTER(c_size_t), c_int,
                     c_int, POINTER(c_float))
est_capi_served_open = _fn("est_capi_served_open", c_int, POINTER(c_void_p), c_char_p, c_char_p, c_int)
est_capi_served_head = _fn("est_capi_served_head", c_char_p, c_void_p)
est_capi_served_inputs = _fn("est_capi_served_inputs", c_int, c_void_p, POINTER(c_char_p), c_int)
est_capi_served_run = _fn("est_capi_served_run", c_int, c_void_p, c_size_t, POINTER(c_char_p), c_int,
                          POINTER(c_void_p), POINTER(c_size_t))
est_servable_free = _fn("est_servable_free", None, c_void_p)
est_servable_output_width = _fn("est_servable_output_width", c_int, c_void_p)
est_servable_dir = _fn("est_servable_dir", c_char_p, c_void_p)
est_servable_precision = _fn("est_servable_precision", c_int, c_void_p)
est_precision_name = _fn("est_precision_name", c_char_p, c_int)

# ---- tasks (libest.so only: the command line's run_* commands) -------------------------------

est_capi_run_task = _fn("est_capi_run_task", c_int, c_char_p, c_int, POINTER(c_char_p))

# ---- records, Examples, checkpoints, safetensors (est/tfrecord.h, example.h, ckpt.h) ----------

est_compression_parse = _fn("est_compression_parse", c_int, c_char_p, POINTER(c_int))
est_tfrecord_reader_open = _fn("est_tfrecord_reader_open", c_int, POINTER(c_void_p), c_char_p, c_int)
est_tfrecord_reader_next = _fn("est_tfrecord_reader_next", c_int, c_void_p, POINTER(POINTER(c_uint8)),
                               POINTER(c_size_t))
est_tfrecord_reader_close = _fn("est_tfrecord_reader_close", None, c_void_p)
est_tfrecord_reader_offset = _fn("est_tfrecord_reader_offset", c_uint64, c_void_p)
est_tfrecord_writer_open = _fn("est_tfrecord_writer_open", c_int, POINTER(c_void_p), c_char_p, c_int)
est_tfrecord_writer_write = _fn("est_tfrecord_writer_write", c_int, c_void_p, c_char_p, c_size_t)
est_tfrecord_writer_close = _fn("est_tfrecord_writer_close", c_int, c_void_p)
est_tfrecord_writer_abort = _fn("est_tfrecord_writer_abort", None, c_void_p)

MAX_RANK = 8


class Bytes(Structure):
    _fields_ = [("size", c_size_t), ("data", POINTER(c_uint8))]


class Feature(Structure):
    _fields_ = [("key", c_char_p), ("key_size", c_size_t), ("kind", c_int), ("count", c_size_t),
                ("int64s", POINTER(c_int64)), ("floats", POINTER(c_float)), ("bytes", POINTER(Bytes))]


class Example(Structure):
    _fields_ = [("count", c_size_t), ("cap", c_size_t), ("features", POINTER(Feature))]


class Tensor(Structure):
    _fields_ = [("dtype", c_int), ("rank", c_int), ("dims", c_int64 * MAX_RANK), ("data", c_void_p)]


est_example_init = _fn("est_example_init", None, POINTER(Example))
est_example_clear = _fn("est_example_clear", None, POINTER(Example))
est_example_parse = _fn("est_example_parse", c_int, POINTER(Example), c_char_p, c_size_t)
est_example_serialize = _fn("est_example_serialize", c_int, POINTER(Example), POINTER(c_void_p), POINTER(c_size_t))
est_example_set_int64 = _fn("est_example_set_int64", c_int, POINTER(Example), c_char_p, c_void_p, c_size_t)
est_example_set_float = _fn("est_example_set_float", c_int, POINTER(Example), c_char_p, c_void_p, c_size_t)
est_example_set_bytes = _fn("est_example_set_bytes", c_int, POINTER(Example), c_char_p, POINTER(Bytes), c_size_t)

est_tensor_free = _fn("est_tensor_free", None, POINTER(Tensor))
est_ckpt_reader_open = _fn("est_ckpt_reader_open", c_int, POINTER(c_void_p), c_char_p)
est_ckpt_reader_count = _fn("est_ckpt_reader_count", c_size_t, c_void_p)
est_ckpt_reader_name = _fn("est_ckpt_reader_name", c_char_p, c_void_p, c_size_t)
est_ckpt_reader_read = _fn("est_ckpt_reader_read", c_int, c_void_p, c_char_p, POINTER(Tensor))
est_ckpt_reader_close = _fn("est_ckpt_reader_close", None, c_void_p)
est_ckpt_latest = _fn("est_ckpt_latest", c_int, c_char_p, c_char_p, c_size_t)
est_safetensors_open = _fn("est_safetensors_open", c_int, POINTER(c_void_p), c_char_p)
est_safetensors_count = _fn("est_safetensors_count", c_size_t, c_void_p)
est_safetensors_name = _fn("est_safetensors_name", c_char_p, c_void_p, c_size_t)
est_safetensors_read = _fn("est_safetensors_read", c_int, c_void_p, c_char_p, POINTER(Tensor))
est_safetensors_close = _fn("est_safetensors_close", None, c_void_p)
est_error_clear = _fn("est_error_clear", None)


def texts_arg(texts, what):
    """A list of str as (char*[n], size_t[n], keep-alive): UTF-8 bytes by length (embedded NULs
    reach est, which names them)."""
    enc = []
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what}[{i}]: expected a str, got {type(t).__name__}")
        enc.append(t.encode("utf-8"))
    n = len(enc)
    ptrs = (c_char_p * max(n, 1))(*enc)
    lens = (c_size_t * max(n, 1))(*[len(b) for b in enc])
    return ptrs, lens, enc


