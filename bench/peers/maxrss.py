"""maxrss.py CMD [ARG...]: runs CMD, passes its output through, then prints one line
"maxrss_kib N": the child's own peak resident set size (ru_maxrss from wait4, KiB), and exits
with the child's status. bench/run_peers.sh wraps every contestant in it, so each figure is
one process's peak, measured the same way for est, PyTorch and ONNX Runtime.

The wrapper forks and execs: Linux carries the forked copy's peak (this small interpreter,
~10 MiB) over the exec as a floor, far below every figure measured with it.
"""
import os
import sys

if len(sys.argv) < 2:
    sys.exit("usage: maxrss.py CMD [ARG...]")
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
print("maxrss_kib %d" % ru.ru_maxrss, flush=True)
sys.exit(os.waitstatus_to_exitcode(status))
