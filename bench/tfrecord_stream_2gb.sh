#!/bin/sh
# A 2 GiB TFRecord file streamed in constant memory (issue 19's odd inputs; make test does
# 300 MB in tests/test_odd_inputs.c). Writes 2048 records of 1 MiB (python3's standard
# library frames them: the records are equal, so one CRC32C serves them all), then runs
# `est tfrecord count` and prints its peak RSS.
#   sh bench/tfrecord_stream_2gb.sh [build-dir] [dir for the 2 GiB file, default /tmp]
set -eu
BUILD=${1:-build}
DIR=${2:-${TMPDIR:-/tmp}}
FILE="$DIR/est-2gb.tf_record"
trap 'rm -f "$FILE"' EXIT
python3 - "$FILE" "$BUILD/est" <<'PY'
import resource, struct, subprocess, sys, time
def crc32c(data, table=[]):
    if not table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
def masked(c):  # TFRecord's masked CRC (docs/tfrecord.md)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
path, est = sys.argv[1], sys.argv[2]
payload = bytes(range(256)) * 4096            # 1 MiB
header = struct.pack("<Q", len(payload))
record = header + struct.pack("<I", masked(crc32c(header))) + payload + struct.pack("<I", masked(crc32c(payload)))
with open(path, "wb") as f:
    for _ in range(2048):
        f.write(record)
t = time.time()
out = subprocess.run([est, "tfrecord", "count", path], capture_output=True, text=True, check=True).stdout.strip()
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"est tfrecord count: {out} records of 1 MiB ({2048 * len(record) / 2**30:.2f} GiB) in {time.time() - t:.1f} s, "
      f"peak RSS {rss / 1024:.1f} MiB")
PY
