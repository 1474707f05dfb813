"""Training from Python: est.run_classifier(**flags) and the other run_* tasks, with the command
line's flags (docs/commands.md), logging through the `est` logger, returning eval_results."""
import ctypes
import os

from . import _lib


def _flag(name, value):
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"flag {name!r}: expected a flag name")
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no{name}"
    if isinstance(value, (int, float, str, os.PathLike)):
        return f"--{name}={os.fspath(value) if isinstance(value, os.PathLike) else value}"
    raise TypeError(f"{name}={value!r}: a flag takes a bool, int, float, str or path")


def _results(path):
    """eval_results.txt ("key = value" lines, as run_classifier.py writes them) as a dict."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if " = " not in line:
                continue
            k, v = line.rstrip("\n").split(" = ", 1)
            try:
                out[k] = int(v)
            except ValueError:
                try:
                    out[k] = float(v)
                except ValueError:
                    out[k] = v
    return out


def _run(task, flags):
    argv = [task] + [_flag(k, v) for k, v in flags.items() if v is not None]
    output_dir = flags.get("output_dir")
    results = os.path.join(os.fspath(output_dir), "eval_results.txt") if output_dir else None
    before = os.stat(results).st_mtime_ns if results and os.path.exists(results) else None
    enc = [a.encode("utf-8") for a in argv]
    arr = (ctypes.c_char_p * len(enc))(*enc)
    rc = _lib.est_capi_run_task(task.encode(), len(enc), arr)
    if rc != 0:
        msg = (_lib.est_error_message() or b"").decode("utf-8", "replace")
        cls = _lib.CancelledError if rc > 128 else _lib.InvalidArgumentError if rc == 2 else _lib.EstError
        raise cls(f"est {task}: {msg or 'exit code %d' % rc}")
    if results and os.path.exists(results) and os.stat(results).st_mtime_ns != before:
        return _results(results)
    return {}


def run_classifier(**flags):
    """`est run_classifier --FLAG=VALUE ...` in-process (True: --FLAG, False: --noFLAG, None: left
    out). Returns eval_results.txt's metrics as a dict when the run evaluated, else {}."""
    return _run("run_classifier", flags)


def run_squad(**flags):
    """`est run_squad` in-process; returns {} (its predictions are files under output_dir)."""
    return _run("run_squad", flags)


def run_ner(**flags):
    """`est run_ner` in-process; eval_results.txt's metrics when it evaluated."""
    return _run("run_ner", flags)


def run_pretraining(**flags):
    """`est run_pretraining` in-process; eval_results.txt's metrics when it evaluated."""
    return _run("run_pretraining", flags)
