#!/usr/bin/env python3
"""A small model of run_pretraining.py's training input order as est computes it.

google-research/bert run_pretraining.py, input_fn_builder (is_training):

    d = tf.data.Dataset.from_tensor_slices(tf.constant(input_files))
    d = d.repeat()
    d = d.shuffle(buffer_size=len(input_files))
    d = d.apply(parallel_interleave(TFRecordDataset, sloppy=is_training, cycle_length=k))
    d = d.shuffle(buffer_size=100)

TF's shuffles draw from an unseeded generator and sloppy interleave depends on timing,
so TF's order is not reproducible; est replaces each by a deterministic equivalent:
both shuffles are tf.data's buffer algorithm over est's Philox stream (src/core/rng.c),
and the interleave is tf.data.Dataset.interleave(cycle_length=k, block_length=1), which
is parallel_interleave's sloppy=False order. This script is plain Python (no TF): it
prints the (file, record) sequence for the cases of tests/test_dataset_interleave.c, whose
output is committed as tests/data/interleave_order.txt:

    python3 tests/reference/interleave_order.py > tests/data/interleave_order.txt

With --check-tf (needs tensorflow) it also checks the interleave model against TF's own
Dataset.interleave and parallel_interleave(sloppy=False) for fixed file orders.
"""
import sys

M32 = 0xFFFFFFFF


def philox4x32(key, c):
    k0, k1 = key & M32, (key >> 32) & M32
    c0, c1, c2, c3 = c
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return [c0, c1, c2, c3]


class Rng:
    """est_rng: word i is lane i % 4 of Philox block i / 4 (counter {block, 0x5eed5eed, 0})."""

    def __init__(self, seed):
        self.key, self.position = seed, 0

    def u32(self):
        block = self.position >> 2
        out = philox4x32(self.key, [block & M32, block >> 32, 0x5EED5EED, 0])
        w = out[self.position & 3]
        self.position += 1
        return w

    def below(self, n):
        limit = (2**64 - 1) - (2**64 - 1) % n
        while True:
            x = (self.u32() << 32) | self.u32()
            if x < limit:
                return x % n


def shuffle(stream, buffer_size, seed):
    """tf.data shuffle: refill the buffer before every pick, pick uniformly, the last
    buffered element fills the hole."""
    rng, buf, it = Rng(seed), [], iter(stream)
    exhausted = False
    while True:
        while len(buf) < buffer_size and not exhausted:
            try:
                buf.append(next(it))
            except StopIteration:
                exhausted = True
        if not buf:
            return
        j = rng.below(len(buf))
        out = buf[j]
        buf[j] = buf[-1]
        buf.pop()
        yield out


def file_stream(nfiles, repeat, shuffle_files, seed):
    def listed():
        p = 0
        while repeat < 0 or p < repeat:
            yield from range(nfiles)
            p += 1
    return shuffle(listed(), nfiles, seed) if shuffle_files else listed()


def interleave(files, lengths, cycle_length):
    """tf.data.Dataset.interleave(block_length=1) over files of `lengths` records."""
    slots = [None] * cycle_length  # [file, next record] or None
    i, end, opened = 0, False, 0
    files = iter(files)
    while not (end and opened == 0):
        s = slots[i]
        if s is None:
            if end:
                i = (i + 1) % cycle_length
                continue
            try:
                slots[i] = [next(files), 0]
                opened += 1
            except StopIteration:
                end = True
                i = (i + 1) % cycle_length
            continue
        if s[1] == lengths[s[0]]:
            slots[i] = None
            opened -= 1
        else:
            yield (s[0], s[1])
            s[1] += 1
        i = (i + 1) % cycle_length


def order(lengths, cycle_length, shuffle_files, file_seed, repeat, record_buffer, record_seed, take):
    out = interleave(file_stream(len(lengths), repeat, shuffle_files, file_seed), lengths, cycle_length)
    if record_buffer > 1:
        out = shuffle(out, record_buffer, record_seed)
    res = []
    for e in out:
        if len(res) == take:
            break
        res.append(e)
    return res


# The cases tests/test_dataset_interleave.c reads back; keep the two in step.
CASES = [
    # name, lengths, cycle_length, shuffle_files, file_seed, repeat, record_buffer, record_seed, take
    ("in_order_cycle2", [3, 1, 2], 2, 0, 0, 1, 0, 0, 100),
    ("shuffled_cycle2_repeat", [3, 1, 2], 2, 1, 7, -1, 0, 0, 24),
    ("shuffled_cycle3_empty_file", [5, 0, 2, 4], 3, 1, 11, -1, 0, 0, 40),
    ("shuffled_cycle3_then_shuffle4", [5, 0, 2, 4], 3, 1, 11, -1, 4, 99, 40),
]


def check_tf():
    import tensorflow as tf
    lengths = [5, 1, 3, 0, 2, 4]
    table = tf.constant(lengths, tf.int64)
    for perm in ([0, 1, 2, 3, 4, 5], [3, 5, 1, 0, 4, 2, 1, 1, 0]):
        for k in (1, 2, 3, 4):
            def records(f):
                return tf.data.Dataset.range(tf.gather(table, f)).map(lambda r: f * 100 + r)
            files = tf.data.Dataset.from_tensor_slices(tf.constant(perm, tf.int64))
            a = [int(x) for x in files.interleave(records, cycle_length=k, block_length=1).as_numpy_iterator()]
            b = [int(x) for x in files.apply(tf.data.experimental.parallel_interleave(
                records, cycle_length=k, sloppy=False)).as_numpy_iterator()]
            want = [f * 100 + r for f, r in interleave(perm, lengths, k)]
            assert a == want, (perm, k, a, want)
            assert b == want, (perm, k, b, want)
    print("interleave model == tf.data interleave == parallel_interleave(sloppy=False)", file=sys.stderr)


def main():
    if "--check-tf" in sys.argv:
        check_tf()
        return
    print("# (file, record) order; tests/reference/interleave_order.py; one case a line:")
    print("# name lengths cycle_length shuffle_files file_seed repeat record_buffer record_seed: f.r f.r ...")
    for name, lengths, k, sf, fs, rep, rb, rs, take in CASES:
        seq = order(lengths, k, sf, fs, rep, rb, rs, take)
        head = "%s %s %d %d %d %d %d %d" % (name, ",".join(map(str, lengths)), k, sf, fs, rep, rb, rs)
        print(head + ": " + " ".join("%d.%d" % e for e in seq))


if __name__ == "__main__":
    main()
