"""Developer check (not part of `make test`): str(np.float32(v)) for 1.5 M float32 bit
patterns -- every exponent's lowest and highest 64 mantissas plus 1.5 M seeded random
ones -- one "bits text" line each, as float32_str_dump.c prints est_format_float32's.

    python3 -m venv /tmp/np && /tmp/np/bin/pip install "numpy<2"
    /tmp/np/bin/python tests/reference/float32_str.py > /tmp/np.txt
    gcc -O2 -Iinclude tests/reference/float32_str_dump.c src/core/float_format.c -lm -o /tmp/f32
    /tmp/f32 < /tmp/np.txt > /tmp/est.txt && diff /tmp/np.txt /tmp/est.txt && echo same

NumPy 1.x, the NumPy of BERT's TF 1.x scripts (NumPy 2 prints large float32 values such
as 1000016.6 in scientific form). Last run (NumPy 1.26.4, 2026-12-03): 1,532,107
patterns, no difference; est's earlier two formatters differed on 3 of them, powers of two
(2^-96 printed 1.26217745e-29 for NumPy's 1.2621775e-29). """
import sys

import numpy as np

rng = np.random.default_rng(7)
bits = set()
for ex in range(0, 255):
    for m in list(range(0, 64)) + list(range((1 << 23) - 64, 1 << 23)):
        bits.add((ex << 23) | m)
bits.update(int(b) for b in rng.integers(1, 0x7F800000, size=1500000, dtype=np.int64))
bits = sorted(bits)
vals = np.array(bits, dtype=np.uint32).view(np.float32)
out = sys.stdout
for b, v in zip(bits, vals):
    out.write("%08x %s\n" % (b, str(v)))
