#!/usr/bin/env python3
"""Python's repr() of floats, for est_squad_format_pyfloat (developer tool; `make test` does
not run it). One line per double: its 16 hex digits (IEEE bits) and repr(). The doubles:
the scripts' typical percentages (100.0 * k / n), powers of two over the whole range (whose
rounding interval is lopsided), the repr layout's edges (1e-4, 1e-5, 1e16, 1e15), subnormals,
the extremes, and seeded random bit patterns.

usage: python3 tests/reference/squad_pyfloat_reference.py > tests/data/squad/pyfloat_golden.txt
"""
import random
import struct


def bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def main():
    values = [0.0, -0.0, 1.0, 0.1, 0.5, 100.0, 1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 1e17, 123456789012345678.0,
              1234567890123456.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.95, 1e-05, 75.0,
              0.30000000000000004, 2.0 / 3, 1.0 / 3, 57.19496773068202, -3.25]
    values += [100.0 * k / n for n in range(1, 60) for k in range(0, n + 1)]
    values += [2.0 ** e for e in range(-1074, 1024, 7)] + [-(2.0 ** e) for e in range(-60, 70, 3)]
    values += [10.0 ** e for e in range(-20, 22)]
    rng = random.Random(1234)
    while len(values) < 4000:
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if x == x and abs(x) != float("inf"):
            values.append(x)
    seen = set()
    for x in values:
        b = bits(x)
        if b not in seen:
            seen.add(b)
            print("%016x %r" % (b, x))


if __name__ == "__main__":
    main()
