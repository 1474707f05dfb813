#!/bin/sh
# est against the peers a user would pick today, side by side: BERT classifier at seq 128,
# batch 32, training step and inference, examples/s, share of the FMA peak and peak RSS of
# each process. Contestants, run one after the other in each (model, mode) group, the order
# rotated every round (ROUNDS > 1 keeps each contestant's best round):
#   est fp32        BUILD/bench_bert --precision fp32
#   est bf16        BUILD/bench_bert --precision bf16
#   torch 1.13      bench/bert_torch.py under Debian's /usr/bin/python3 (python3-torch)
#   torch2 fp32     bench/peers/torch2_bert.py (PyPI torch, bench/peers/.venv), eager and
#                   torch.compile: both are run and printed, the table keeps the better
#   torch2 bf16     the same under torch.autocast(bfloat16), eager and compile
#   ort fp32        inference only: bench/peers/ort_bert.py, ONNX Runtime on the graph
#                   exported from the same PyTorch model and fused by its transformer optimizer
#
#   sh bench/run_peers.sh [BUILD_DIR] [THREADS] [ROUNDS] [MODELS] [MODES]
#   e.g. PEERS_LOCK=/tmp/est-bench.lock sh bench/run_peers.sh build 2 1 "tiny mini small base"
#
# PEERS_LOCK=FILE   run each (model, mode) group under `flock FILE` in a fresh session at
#                   full priority (autogroup nice 0), with `uptime` before and after it: one
#                   group is one lock hold (Base training, the longest, ~5 min when quiet).
# PEERS_COMPILE     the torch.compile settings tried (default "0 1"; "0" skips compiling)
# PEERS_RESULTS=F   also append one tab-separated line per contestant to F
# PEERS_VENV        the venv (default bench/peers/.venv, made by bench/peers/setup.sh)
# BENCH_CORETYPE=X  sets OPENBLAS_CORETYPE=X for every contestant instead of unsetting it, as
#                   bench/run_bert.sh: on a VM whose CPU OpenBLAS does not recognise, its own
#                   detection falls back to the SSE3 Prescott kernels (perf shows
#                   sgemm_kernel_PRESCOTT), which slows est fp32 and Debian's torch 1.13 (it
#                   calls OpenBLAS through libblas.so.3) alike; e.g. BENCH_CORETYPE=Cooperlake.
#                   PyPI torch (MKL, oneDNN) and ONNX Runtime (MLAS) do not read it.
#
# Environment, the same as bench/run_bert.sh for every contestant: OPENBLAS_CORETYPE (but see
# BENCH_CORETYPE) and OPENBLAS_L2_SIZE unset, OMP_NUM_THREADS=THREADS, OMP_WAIT_POLICY unset
# (libgomp's default: spin a while, then sleep; PEERS_WAIT_POLICY=PASSIVE|ACTIVE sets it for
# all: PASSIVE cost torch 2 eager 18-29% on Mini under the bench lock, bench/README.md);
# the PyTorch rows get tcmalloc preloaded (Debian's libtcmalloc-minimal4 if installed, else the
# copy setup.sh unpacked into the venv) and torch.set_num_threads(THREADS); ONNX Runtime uses
# its own arena and intra_op_num_threads=THREADS. Untimed work: the ONNX graph is exported once
# per model (kept in the venv); a torch.compile contestant compiles during its two warm-up
# steps, with inductor's FX graph cache on (kept in the venv), so a second round or run loads
# its kernels.
#
# FLOPs per example, as docs/performance.md §2 counts them (GEMM work only, I = 4H, C = 2):
#   forward = L·(2·S·(4H² + 2H·I) + 4·S²·H) + 2H² + 2H·C, training step = 3 × forward.
# Share of peak = ex/s × FLOPs / peak. The peak is measured at the start of each group, under
# the same lock: BUILD/bench_peak THREADS (VFMADD231PS for fp32 rows, VDPBF16PS for bf16
# rows, every thread at once, best of 5); each group prints it and the results line carries
# it. Without bench_peak the nominal figures are used: 452 GFLOP/s fp32 (2 cores × 2 FMA
# pipes × 16 lanes × 2 FLOP × ~3.5 GHz) and 904 bf16 (VDPBF16PS at the FMA's issue rate),
# which the Emerald Rapids VM this was run on does not reach (bench/README.md, "peak").
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SELF=$HERE/run_peers.sh
VENV=${PEERS_VENV:-$HERE/peers/.venv}
SYSPY=/usr/bin/python3

if [ "${1:-}" = --group ]; then
  model=$2 mode=$3
  : "${BUILD:?}" "${THREADS:?}" "${ROUNDS:?}" "${COMPILE:?}" "${TCMALLOC?}" "${BLASENV?}" "${WAITENV?}"
else
  BUILD=${1:-build}
  THREADS=${2:-2}
  ROUNDS=${3:-1}
  MODELS=${4:-"tiny mini small base"}
  MODES=${5:-"train infer"}
  COMPILE=${PEERS_COMPILE:-"0 1"}
  case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
  [ -x "$BUILD/bench_bert" ] || { echo "run_peers.sh: $BUILD/bench_bert not found (build the bench_bert target)" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || { echo "run_peers.sh: no venv at $VENV (run sh bench/peers/setup.sh)" >&2; exit 1; }
  TCMALLOC=
  for lib in /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 "$VENV"/tcmalloc/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
    if [ -z "$TCMALLOC" ] && [ -e "$lib" ]; then TCMALLOC=$lib; fi
  done
  BLASENV=${BENCH_CORETYPE:+OPENBLAS_CORETYPE=$BENCH_CORETYPE}
  WAITENV=${PEERS_WAIT_POLICY:+OMP_WAIT_POLICY=$PEERS_WAIT_POLICY}  # after env's -u options
  export BUILD THREADS ROUNDS COMPILE TCMALLOC BLASENV WAITENV
  export TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_CACHE_DIR="$VENV/inductor-cache"
  export PEERS_ONNX_DIR="$VENV/onnx"
fi

# contestants of a group: name|precision
contestants() {
  echo "est|fp32" "est|bf16" "torch1.13|fp32"
  for c in $COMPILE; do echo "torch2-$( [ "$c" = 1 ] && echo compile || echo eager)|fp32"; done
  for c in $COMPILE; do echo "torch2-$( [ "$c" = 1 ] && echo compile || echo eager)|bf16"; done
  [ "$2" = infer ] && echo "ort|fp32"
  return 0
}

# run_one NAME PRECISION MODEL MODE: runs one contestant under maxrss.py (at most 10 minutes)
run_one() {
  name=$1 prec=$2 m=$3 md=$4
  set -- timeout 600 "$SYSPY" "$HERE/peers/maxrss.py" \
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY $BLASENV $WAITENV \
    OMP_NUM_THREADS="$THREADS"
  case $name in
    est) "$@" "$BUILD/bench_bert" --model "$m" --mode "$md" --threads "$THREADS" --precision "$prec" ;;
    torch1.13) "$@" ${TCMALLOC:+LD_PRELOAD=$TCMALLOC} "$SYSPY" "$HERE/bert_torch.py" --model "$m" --mode "$md" \
      --threads "$THREADS" ;;
    torch2-*) c=0; [ "$name" = torch2-compile ] && c=1
      "$@" ${TCMALLOC:+LD_PRELOAD=$TCMALLOC} "$VENV/bin/python" "$HERE/peers/torch2_bert.py" --model "$m" --mode "$md" \
        --threads "$THREADS" --precision "$prec" --compile "$c" ;;
    ort) "$@" "$VENV/bin/python" "$HERE/peers/ort_bert.py" run --model "$m" --dir "$PEERS_ONNX_DIR" --threads "$THREADS" ;;
  esac
}

flops() {  # flops MODEL MODE -> FLOPs per example
  case $1 in tiny) L=2 H=128 ;; mini) L=4 H=256 ;; small) L=4 H=512 ;; base) L=12 H=768 ;; esac
  awk -v L="$L" -v H="$H" -v S=128 -v mode="$2" 'BEGIN { I = 4 * H; C = 2
    f = L * (2 * S * (4 * H * H + 2 * H * I) + 4 * S * S * H) + 2 * H * H + 2 * H * C
    printf "%.0f\n", (mode == "train" ? 3 : 1) * f }'
}

if [ "${1:-}" = --group ]; then
  echo "--- $model $mode: load before: $(uptime | sed 's/.*load average: //')"
  F=$(flops "$model" "$mode")
  # this group's ceiling, measured now: "... GFLOP/s on THREADS" of each instruction
  PEAK_FP32=452 PEAK_BF16=904 peak_from=nominal
  if [ -x "$BUILD/bench_peak" ] && peaks=$("$BUILD/bench_peak" "$THREADS" 2>/dev/null); then
    PEAK_FP32=$(echo "$peaks" | awk '/vfmadd231ps/ { print $(NF - 3) }')
    PEAK_BF16=$(echo "$peaks" | awk '/vdpbf16ps/ && /GFLOP/ { print $(NF - 3) }')
    # with AMX, bf16's ceiling is the tile unit's (est and oneDNN both run TDPBF16PS there)
    PEAK_AMX=$(echo "$peaks" | awk '/tdpbf16ps/ && /GFLOP/ { print $(NF - 3) }')
    [ -n "$PEAK_AMX" ] && PEAK_BF16=$PEAK_AMX
    PEAK_BF16=${PEAK_BF16:-0} peak_from="measured, bench_peak $THREADS"
  fi
  echo "    peak GFLOP/s ($peak_from): fp32 FMA $PEAK_FP32, bf16 ${PEAK_AMX:+AMX tiles }$PEAK_BF16"
  list=$(contestants "$model" "$mode")
  n=$(echo "$list" | wc -w)
  tmp=$(mktemp -d)
  r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    # rotate the order by r so that no contestant always runs first (or last) in a round
    i=0 rr=$((r % n))
    for c in $list $list; do
      if [ "$i" -ge "$rr" ] && [ "$i" -lt $((rr + n)) ]; then
        name=${c%|*} prec=${c#*|}
        out=$(run_one "$name" "$prec" "$model" "$mode" 2>"$tmp/err") || { echo "$name $prec failed:"; tail -3 "$tmp/err"; }
        exs=$(echo "$out" | awk '$5 == "ex/s" { print $4 }')
        rss=$(echo "$out" | awk '$1 == "maxrss_kib" { print $2 }')
        key=$(echo "$name-$prec" | tr -c 'a-z0-9.\n-' _)
        prev=$(cat "$tmp/$key" 2>/dev/null || echo "0 0")
        echo "${exs:-0} ${rss:-0} $prev" | awk '{ print ($1 + 0 > $3 + 0 ? $1 : $3), ($2 > $4 ? $2 : $4) }' >"$tmp/$key"
        echo "  round $((r + 1)): $(echo "$out" | awk '$5 == "ex/s"')"
      fi
      i=$((i + 1))
    done
    r=$((r + 1))
  done
  printf "%-6s %-5s %-15s %-4s %10s %9s %8s %9s %7s\n" model mode peer prec "ex/s" "GFLOP/s" "of peak" "RSS MiB" peak
  for c in $list; do
    name=${c%|*} prec=${c#*|}
    key=$(echo "$name-$prec" | tr -c 'a-z0-9.\n-' _)
    read -r exs rss <"$tmp/$key"
    line=$(awk -v m="$model" -v md="$mode" -v n="$name" -v p="$prec" -v e="$exs" -v r="$rss" -v f="$F" \
      -v pf="$PEAK_FP32" -v pb="$PEAK_BF16" 'BEGIN {
      g = e * f / 1e9; peak = (p == "bf16") ? pb : pf
      printf "%-6s %-5s %-15s %-4s %10.2f %9.1f %7.1f%% %9.0f %7.1f", m, md, n, p, e, g,
        (peak > 0 ? 100 * g / peak : 0), r / 1024, peak }')
    echo "$line"
    [ -n "${PEERS_RESULTS:-}" ] && echo "$line" | awk -v OFS='\t' '{ $1 = $1; print }' >>"$PEERS_RESULTS"
  done
  rm -rf "$tmp"
  echo "--- $model $mode: load after: $(uptime | sed 's/.*load average: //')"
  exit 0
fi

echo "run_peers: $(date -u '+%Y-%m-%d %H:%M UTC'), threads $THREADS, best of $ROUNDS round(s), PyTorch malloc: ${TCMALLOC:-glibc},"
echo "  est $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '(no git)'), OPENBLAS_CORETYPE: ${BENCH_CORETYPE:-unset}, OMP_WAIT_POLICY: ${PEERS_WAIT_POLICY:-unset},"
echo "  torch 1.13: $($SYSPY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo missing)," \
  "venv: $("$VENV/bin/python" -c 'import torch, onnxruntime; print("torch", torch.__version__, "onnxruntime", onnxruntime.__version__)')"
for model in $MODELS; do
  for mode in $MODES; do
    # untimed, outside the lock: the ONNX graph, exported once per model and kept in the venv
    # (an export from before ort_bert.py exported HF's module tree is redone)
    if [ "$mode" = infer ] && ! grep -qs '"graph": "hf"' "$PEERS_ONNX_DIR/bert_$model.json"; then
      mkdir -p "$PEERS_ONNX_DIR"
      "$VENV/bin/python" "$HERE/peers/ort_bert.py" export --model "$model" --out "$PEERS_ONNX_DIR" \
        2>"$PEERS_ONNX_DIR/export_$model.log" | sed 's/^/  onnx export: /'
      tail -1 "$PEERS_ONNX_DIR/export_$model.log" | grep '^ort_bert:' || true
    fi
    if [ -n "${PEERS_LOCK:-}" ]; then
      flock "$PEERS_LOCK" setsid -w sh -c 'echo 0 > /proc/self/autogroup; exec sh "$0" --group "$1" "$2"' "$SELF" "$model" "$mode"
    else
      sh "$SELF" --group "$model" "$mode"
    fi
  done
done
