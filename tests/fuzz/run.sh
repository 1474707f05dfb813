#!/bin/sh
# Builds every tests/fuzz/fuzz_*.c with clang + libFuzzer + ASan/UBSan into build-fuzz and
# runs each for FUZZ_SECONDS (default 300); FUZZ_TARGETS="fuzz_ckpt fuzz_example" runs only
# those. Seeds come from tests/fuzz/seeds/<target>/; the growing corpus is kept in
# build-fuzz/corpus/<target>/. A crash, a leak or undefined behaviour stops the script with
# libFuzzer's report and the input that caused it (crash-*, leak-*) in build-fuzz/.
set -eu
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
# A clang that knows the CPU features src/nn probes (AMX, AVX-VNNI): 19 does, 14 does not;
# the newest clang-N found first, FUZZ_CC=clang-N picks one.
CC=${FUZZ_CC:-}
if [ -z "$CC" ]; then
  for c in clang-21 clang-20 clang-19 clang-18 clang; do
    command -v "$c" >/dev/null && { CC=$c; break; }
  done
fi
[ -n "$CC" ] && command -v "$CC" >/dev/null || { echo "run.sh: clang is needed, newer than Debian 12's 14 (Debian 12: apt-get install clang-19 libomp-19-dev libclang-rt-19-dev; clang finds OpenMP only with libomp)" >&2; exit 1; }
CC=$CC CXX=$(echo "$CC" | sed 's/clang/clang++/') cmake -S . -B "$BUILD" -DEST_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target fuzz_all -j "${JOBS:-2}"
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  case " ${FUZZ_TARGETS:-$name} " in *" $name "*) ;; *) continue ;; esac
  corpus="$BUILD/corpus/$name"
  mkdir -p "$corpus"
  seeds=""
  [ -d "tests/fuzz/seeds/$name" ] && seeds="tests/fuzz/seeds/$name"
  echo "== $name for ${FUZZ_SECONDS}s"
  (cd "$BUILD" && "./tests/fuzz/$name" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -print_final_stats=1 \
      "corpus/$name" ${seeds:+"../$seeds"})
done
echo "fuzz: all targets clean"
