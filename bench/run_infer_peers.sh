#!/bin/sh
# est inference against the peer a user would pick in each precision (issue 36), BERT classifier
# (Tiny, Mini, Small, Base: MODELS), whole forward pass, same model and inputs, 2 threads:
#   est-fp32      BUILD/bench_bert --precision fp32 (weights frozen, as predict and serve run them)
#   est-bf16      BUILD/bench_bert --precision bf16
#   est-int8      BUILD/bench_bert --precision int8
#   ort-fp32      bench/peers/ort_bert.py on the BERT-optimized graph (bench/run_peers.sh's peer)
#   ort-int8      the same graph through onnxruntime.quantization.quantize_dynamic (per-channel
#                 QInt8, bench/peers/ort_int8.py), timed by the same runner
#   torch-fp32    bench/peers/torch2_bert.py --compile 1 (torch.compile with freezing, sdpa)
#   torch-bf16    the same under torch.autocast(bfloat16)
#   torch-int8    bench/peers/torch_int8.py: torch.ao.quantization.quantize_dynamic on nn.Linear
#                 (qint8) of bench/bert_torch.py's model
# (the torch rows are skipped when TORCH_PY is empty). Shapes (SHAPES): batch 32 x seq 128
# (ex/s, mean of ITERS32 steps), batch 1 x seq 128 and batch 1 x seq 16 (one short request;
# ms/step = mean of ITERS1 forwards); both counts for Base, times 3 for Small, 6 for Mini and
# 20 for Tiny. Each round runs every contestant of a shape once, the order rotated every round,
# so est and the peers alternate on the same machine minutes apart.
#
#   sh bench/run_infer_peers.sh [BUILD_DIR] [THREADS] [ROUNDS] [MODELS]
#
# ORT_PY=python      with onnxruntime (1.23, bench/peers/requirements.txt) and numpy; default
#                    bench/peers/.venv/bin/python
# EXPORT_PY=python   with torch, transformers, onnx, onnxruntime, for the one-time export
#                    (ort_bert.py export) and quantization; default ORT_PY
# TORCH_PY=python    with torch 2.4.1, for the torch rows; default EXPORT_PY
# ONNX_DIR=DIR       where the exported graphs are kept (default bench/peers/.venv/onnx)
# NAMES="..."        the contestants (default all of the above)
# SHAPES="B S ..."   default "32 128 1 128 1 16"
# FIRST_ROUND=N      number the rounds from N (the order rotated N-1 places): a second
#                    invocation with FIRST_ROUND=2 runs the contestants in another order
# PEERS_LOCK=FILE    run each contestant under `flock FILE` (uptime printed per shape)
# Untimed: the export and quantization (once, before the rounds), torch.compile (its two
# warm-up steps). OMP_NUM_THREADS=THREADS for all; OPENBLAS_* left as they are.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
THREADS=${2:-2}
ROUNDS=${3:-1}
MODELS=${4:-base}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
ORT_PY=${ORT_PY:-$HERE/peers/.venv/bin/python}
EXPORT_PY=${EXPORT_PY:-$ORT_PY}
TORCH_PY=${TORCH_PY-$EXPORT_PY}
ONNX_DIR=${ONNX_DIR:-$HERE/peers/.venv/onnx}
ITERS32=${ITERS32:-3}
ITERS1=${ITERS1:-50}
if [ "${1:-}" = --one ]; then  # --one BUILD THREADS MODEL NAME BATCH SEQ ITERS WARMUP
  shift; BUILD=$1 THREADS=$2 model=$3; shift 3; ONE="$*"
fi
[ -x "$BUILD/bench_bert" ] || { echo "run_infer_peers.sh: $BUILD/bench_bert not found" >&2; exit 1; }
export OMP_NUM_THREADS=$THREADS
# torch.compile's kernels cached across runs (as bench/run_peers.sh)
export TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$ONNX_DIR/inductor-cache}

[ -n "${ONE:-}" ] || lscpu | sed -n 's/^Model name: *//p'
[ -n "${ONE:-}" ] || for model in $MODELS; do
  if [ ! -e "$ONNX_DIR/bert_$model.onnx" ]; then
    "$EXPORT_PY" "$HERE/peers/ort_bert.py" export --model "$model" --out "$ONNX_DIR"
  fi
  if [ ! -e "$ONNX_DIR/int8/bert_$model.onnx" ]; then
    "$EXPORT_PY" "$HERE/peers/ort_int8.py" --model "$model" --dir "$ONNX_DIR"
  fi
done

# contestant NAME BATCH SEQ ITERS WARMUP: one timed run, its one output line
contestant() {
  name=$1 b=$2 s=$3 n=$4 w=$5
  common="--model $model --batch $b --seq $s --iters $n --warmup $w --threads $THREADS"
  case $name in
    est-*) "$BUILD/bench_bert" $common --mode infer --precision "${name#est-}" ;;
    torch-fp32|torch-bf16)
      "$TORCH_PY" "$HERE/peers/torch2_bert.py" --mode infer --precision "${name#torch-}" --compile 1 \
        --model "$model" --batch "$b" --seq "$s" --iters "$n" --threads "$THREADS" ;;
    ort-fp32) "$ORT_PY" "$HERE/peers/ort_bert.py" run $common --dir "$ONNX_DIR" ;;
    ort-int8) "$ORT_PY" "$HERE/peers/ort_bert.py" run $common --dir "$ONNX_DIR/int8" ;;
    torch-int8) "$TORCH_PY" "$HERE/peers/torch_int8.py" $common ;;
  esac | sed "s/^/$name b$b s$s: /"
}

if [ -n "${ONE:-}" ]; then contestant $ONE; exit; fi

names=${NAMES:-"est-fp32 est-bf16 est-int8 ort-fp32 ort-int8 torch-fp32 torch-bf16 torch-int8"}
[ -n "$TORCH_PY" ] || names=$(echo "$names" | tr ' ' '\n' | grep -v '^torch-' | tr '\n' ' ')
SHAPES=${SHAPES:-"32 128 1 128 1 16"}
round=$((${FIRST_ROUND:-1} - 1)) last=$((${FIRST_ROUND:-1} - 1 + ROUNDS))
while [ $round -lt $last ]; do
  # rotate the order by the round number
  order=$names i=0
  while [ $i -lt $round ]; do order="${order#* } ${order%% *}"; i=$((i + 1)); done
  for model in $MODELS; do
    set -- $SHAPES
    while [ $# -ge 2 ]; do
      # iterations scaled to the model, so that a small model's step is timed over ~0.1 s or more
      case $model in tiny) scale=20 ;; mini) scale=6 ;; small) scale=3 ;; *) scale=1 ;; esac
      if [ "$1" -gt 1 ]; then shape="$1 $2 $((ITERS32 * scale)) 1"; else shape="$1 $2 $((ITERS1 * scale)) 5"; fi
      shift 2
      echo "round $((round + 1)) $model: $(uptime)"
      for name in $order; do
        if [ -n "${PEERS_LOCK:-}" ]; then
          flock "$PEERS_LOCK" env ORT_PY="$ORT_PY" TORCH_PY="$TORCH_PY" ONNX_DIR="$ONNX_DIR" \
            sh "$HERE/run_infer_peers.sh" --one "$BUILD" "$THREADS" "$model" $name $shape
        else
          contestant $name $shape
        fi
      done
      echo "round $((round + 1)) $model done: $(uptime)"
    done
  done
  round=$((round + 1))
done
