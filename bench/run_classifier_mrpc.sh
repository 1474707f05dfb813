#!/bin/sh
# End-to-end benchmark: `est run_classifier` against the same recipe in PyTorch
# (bench/run_classifier_torch.py), one after the other in the same run, on MRPC with the
# shipped small config (data/bert_config.json: BERT-Tiny's shape, from scratch):
#   --do_train --do_eval, max_seq_length 128, batch 32, lr 2e-4, 3 epochs, warmup 0.1.
# Each side's wall time covers everything: reading the TSVs, tokenising, writing/reading
# records (est), training 343 steps, evaluating the 408 dev examples, writing results.
#
#   sh bench/run_classifier_mrpc.sh [build-dir] [threads]
#
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for both sides (so OpenBLAS picks its
# kernels from the CPU it finds), and both get the same thread count.
set -eu
BUILD=${1:-build}
THREADS=${2:-$(nproc 2>/dev/null || echo 2)}
EST="$BUILD/est"
PY=${PYTHON:-/usr/bin/python3}
EPOCHS=${EPOCHS:-3}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/est-bench-mrpc-XXXXXX")}
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_NUM_THREADS="$THREADS"
echo "bench: MRPC end to end, $THREADS threads, OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset, output in $OUT"

COMMON="--task_name=mrpc --do_train --do_eval --data_dir=data/MRPC --vocab_file=data/vocab.txt \
 --bert_config_file=data/bert_config.json --max_seq_length=128 --train_batch_size=32 --eval_batch_size=8 \
 --learning_rate=2e-4 --warmup_proportion=0.1 --num_train_epochs=$EPOCHS --output_dir"

now() { date +%s.%N; }
# CPU seconds (user + sys) of this shell's finished children, from /proc: wall time on a
# shared machine depends on the other load, CPU time much less.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($16 + $17) / hz }' /proc/$$/stat; }

c0=$(cpu); t0=$(now)
# shellcheck disable=SC2086
"$EST" run_classifier $COMMON="$OUT/est" --num_threads="$THREADS" --save_checkpoints_steps=1000 \
  > "$OUT/est.log" 2>&1 || { tail -20 "$OUT/est.log"; exit 1; }
t1=$(now); c1=$(cpu)
# shellcheck disable=SC2086
"$PY" bench/run_classifier_torch.py $COMMON="$OUT/torch" --num_threads="$THREADS" \
  > "$OUT/torch.log" 2>&1 || { tail -20 "$OUT/torch.log"; exit 1; }
t2=$(now); c2=$(cpu)

acc() { sed -n 's/^eval_accuracy = //p' "$1/eval_results.txt"; }
awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v c0="$c0" -v c1="$c1" -v c2="$c2" \
    -v ea="$(acc "$OUT/est")" -v pa="$(acc "$OUT/torch")" 'BEGIN {
  e = t1 - t0; p = t2 - t1; ec = c1 - c0; pc = c2 - c1
  printf "est      %8.1f s wall  %8.1f s CPU   eval_accuracy %s\n", e, ec, ea
  printf "pytorch  %8.1f s wall  %8.1f s CPU   eval_accuracy %s\n", p, pc, pa
  printf "speed-up (pytorch / est): %.2fx wall, %.2fx CPU;  accuracy difference: %+.1f points\n", \
         p / e, pc / ec, 100 * (ea - pa)
}'
