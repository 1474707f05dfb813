"""Helpers of bench/create_pretraining_data.sh (standard library only).

  corpus TSV OUT   first column of a GLUE TSV (header skipped) as create_pretraining_data
                   input: one sentence per line, documents of 2 to 8 sentences (seeded).
  compare A B      TFRecord files A and B hold the same Examples feature for feature (any
                   map order); prints the count and exits 1 on the first difference.
"""
import random
import struct
import sys


def corpus(tsv, out):
    with open(tsv, encoding="utf-8") as f:
        lines = [l.rstrip("\n").split("\t")[0].strip() for l in f][1:]
    rng = random.Random(1)
    docs, i = [], 0
    while i < len(lines):
        n = rng.randint(2, 8)
        docs.append("\n".join(s for s in lines[i:i + n] if s))
        i += n
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n\n".join(docs) + "\n")


def records(path):
    data = open(path, "rb").read()
    off = 0
    while off < len(data):
        (n,) = struct.unpack("<Q", data[off:off + 8])
        yield data[off + 12:off + 12 + n]
        off += 16 + n


def varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 127) << s
        s += 7
        if c < 128:
            return r, i


def features(rec):
    """{key: serialized Feature} of one Example (every record here is packed)."""
    n, i = varint(rec, 1)
    out = {}
    while i < len(rec):
        ln, i = varint(rec, i + 1)
        entry = rec[i:i + ln]
        i += ln
        kl, j = varint(entry, 1)
        out[entry[j:j + kl]] = entry[j + kl:]
    return out


def compare(a, b):
    ra, rb = list(records(a)), list(records(b))
    if len(ra) != len(rb):
        sys.exit("record counts differ: %d vs %d" % (len(ra), len(rb)))
    for k, (x, y) in enumerate(zip(ra, rb)):
        if features(x) != features(y):
            sys.exit("record %d differs" % k)
    print("outputs: %d records, the same features in every record" % len(ra))


if __name__ == "__main__":
    {"corpus": corpus, "compare": compare}[sys.argv[1]](*sys.argv[2:])
