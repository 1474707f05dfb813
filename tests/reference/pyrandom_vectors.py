"""Prints the CPython random.Random values that tests/test_pyrandom.c expects.

Run: python3 tests/reference/pyrandom_vectors.py   (the values in the test came from
CPython 3.11.7; random.Random's draws have been the same since Python 3.2.)
"""
import random


def main():
    for seed in (12345, 0, -7, 2**40 + 5, 2**63 - 1):
        r = random.Random(seed)
        words = [r.getrandbits(32) for _ in range(3)]
        print("seed %d u32 %s" % (seed, " ".join("0x%08x" % w for w in words)))
    r = random.Random(12345)
    print("random %s" % " ".join(repr(r.random()) for _ in range(3)))
    r = random.Random(3)
    print("bits1 %d bits7 %d bits33 %d bits64 %d" % (r.getrandbits(1), r.getrandbits(7),
                                                   r.getrandbits(33), r.getrandbits(64)))
    r = random.Random(3)
    print("randint %s" % " ".join(str(r.randint(a, b)) for a, b in
                                  ((2, 125), (0, 0), (1, 1), (0, 30521), (-5, 5), (0, 2**40))))
    r = random.Random(12345)
    x = list(range(10))
    r.shuffle(x)
    print("shuffle10 %s next %s" % (x, r.random()))
    r = random.Random(12345)
    for _ in range(1000):    # past one regeneration of the 624-word state
        r.random()
    print("after1000 %r" % r.random())
    print("round %s" % [round(x) for x in (0.5, 1.5, 2.5, 19 * 0.15, 17 * 0.15, 10 * 0.15)])


main()
