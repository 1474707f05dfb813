#!/bin/sh
# Pretraining steps/s of `est run_pretraining` against the same model_fn in PyTorch
# (bench/run_pretraining_torch.py), BERT-Tiny and BERT-Small shapes, seq 128, 20 masked
# predictions, vocab 30522, dropout 0.1, batch BATCH. est trains on the records
# create_pretraining_data.py wrote from CoLA (tests/data/pretraining/cola_seed12345.tfrecord)
# from a random init; the peer on random batches of the same shapes (its speed does not
# depend on the values). est runs STEPS + 1 steps and prints two figures: "est steps/s", its
# own "Trained N steps in T sec" line (model building left out; the first step, the input
# pipeline's start and the final checkpoint save in), and "est steady", its global_step/sec
# log line over steps 1..STEPS (--log_step_count_steps=STEPS: the first step and the final
# save left out, as the peer leaves out its WARMUP steps). The ratio is est steady / torch.
#
#   bench/run_pretraining.sh [BUILD_DIR] [THREADS] [BATCH] [MODELS] [STEPS]
#   e.g. bench/run_pretraining.sh build 2 32 "tiny small" 10
#
# Environment as bench/run_bert.sh: OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for both,
# OMP_NUM_THREADS=THREADS, OMP_WAIT_POLICY=PASSIVE, tcmalloc for the peer when installed.
# BENCH_CORETYPE=X sets OPENBLAS_CORETYPE=X for both instead (on a VM where OpenBLAS's own
# detection falls back to its SSE3 "Prescott" kernels, e.g. BENCH_CORETYPE=SkylakeX).
set -e
BLASENV="-u OPENBLAS_CORETYPE"
[ -n "$BENCH_CORETYPE" ] && BLASENV="OPENBLAS_CORETYPE=$BENCH_CORETYPE"
BUILD=${1:-build}
THREADS=${2:-2}
BATCH=${3:-32}
MODELS=${4:-"tiny small"}
STEPS=${5:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
EST="$BUILD/est"
[ -x "$EST" ] || { echo "run_pretraining.sh: $EST not found (build first)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TCMALLOC=
for lib in /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4; do
  if [ -z "$TCMALLOC" ] && [ -e "$lib" ]; then TCMALLOC=$lib; fi
done
shape() {  # L H A I
  case "$1" in
    tiny) echo 2 128 2 512 ;;
    mini) echo 4 256 4 1024 ;;
    small) echo 4 512 8 2048 ;;
    *) echo "unknown model $1" >&2; exit 1 ;;
  esac
}
printf "%-6s %12s %12s %12s %8s   (batch %s, seq 128, 20 predictions, threads %s, peer malloc: %s, %s)\n" \
  model "est steps/s" "est steady" "torch st/s" ratio "$BATCH" "$THREADS" "${TCMALLOC:-glibc}" "$BLASENV"
for model in $MODELS; do
  set -- $(shape "$model")
  cat > "$TMP/$model.json" <<JSON
{"vocab_size": 30522, "hidden_size": $2, "num_hidden_layers": $1, "num_attention_heads": $3,
 "intermediate_size": $4, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2}
JSON
  rm -rf "$TMP/out"
  env -u OPENBLAS_L2_SIZE $BLASENV OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE \
    "$EST" run_pretraining --bert_config_file="$TMP/$model.json" \
    --input_file="$ROOT/tests/data/pretraining/cola_seed12345.tfrecord" --output_dir="$TMP/out" --do_train \
    --train_batch_size="$BATCH" --num_train_steps=$((STEPS + 1)) --num_warmup_steps=1 --learning_rate=1e-4 \
    --save_checkpoints_steps=100000 --log_step_count_steps="$STEPS" --num_threads="$THREADS" --seed=1 \
    > "$TMP/est.log" 2>&1
  e=$(awk '/Trained [0-9]+ steps in/ { for (i = 1; i <= NF; i++) if ($i == "in") print $(i - 2) / $(i + 1) }' \
    "$TMP/est.log")
  s=$(awk '/global_step\/sec:/ { print $NF }' "$TMP/est.log" | tail -n 1)
  t=$(env -u OPENBLAS_L2_SIZE $BLASENV OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE \
    ${TCMALLOC:+LD_PRELOAD=$TCMALLOC} /usr/bin/python3 "$HERE/run_pretraining_torch.py" --model "$model" \
    --batch "$BATCH" --steps "$STEPS" --threads "$THREADS" | awk '{print $2}')
  printf "%-6s %12.3f %12.3f %12.3f %7.2fx\n" "$model" "$e" "$s" "$t" "$(awk -v a="$s" -v b="$t" 'BEGIN { print a / b }')"
done
