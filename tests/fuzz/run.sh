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
command -v clang >/dev/null || { echo "run.sh: clang is needed (apt-get install clang libomp-dev: clang finds OpenMP only with libomp)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DEST_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
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
