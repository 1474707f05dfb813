#!/bin/sh
# SQuAD feature conversion, est against run_squad.py's own code, whole process: the JSON read
# (read_squad_examples), the training shuffle, convert_examples_to_features at run_squad.py's
# defaults (max_seq_length 384, doc_stride 128, max_query_length 64, uncased) and the
# TFRecord writer (FeatureWriter). est is build/bench_squad_features; the peer is
# bench/squad_features_py.py on Google's bert-tensorflow 1.0.4 (PyPI) under TensorFlow 2.15.
# Both run one after the other (alternating which goes first) ROUNDS times per mode; every
# round's two record files are compared parsed (bench/squad_records_equal.py) and the run
# stops on a difference. Prints the median whole-process seconds (process start to exit,
# TF's import included) and in-process seconds (read + convert + write) of both, and the
# ratios python/est.
#
#   bench/run_squad_features.sh SQUAD.json [REPEAT] [ROUNDS] [BUILD_DIR] [VENV_PYTHON]
#   e.g. bench/run_squad_features.sh dev.json 10 3 build .venv-interop/bin/python
#
# The input is SQUAD.json's articles repeated REPEAT times (bench/squad_bench_input.py), as a
# prediction file (all answers) and a training file (first answer only). When the venv's
# python cannot import `bert`, bert-tensorflow==1.0.4 is fetched with pip download --no-deps
# into the work directory and put on PYTHONPATH (the venv itself is left as it is).
set -e
SRC=${1:?usage: run_squad_features.sh SQUAD.json [REPEAT] [ROUNDS] [BUILD_DIR] [VENV_PYTHON]}
REPEAT=${2:-10}
ROUNDS=${3:-3}
BUILD=${4:-build}
PY=${5:-.venv-interop/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
VOCAB="$HERE/../tests/data/vocab_uncased.txt"
EST="$BUILD/bench_squad_features"
[ -x "$EST" ] || { echo "run_squad_features.sh: $EST not found (build the bench_squad_features target)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/squad_features.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if ! "$PY" -c "import bert.run_squad" 2>/dev/null; then
  "$PY" -m pip download -q bert-tensorflow==1.0.4 --no-deps -d "$WORK/pkg"
  "$PY" -m zipfile -e "$WORK"/pkg/bert_tensorflow-1.0.4-*.whl "$WORK/site"
  PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi
python3 "$HERE/squad_bench_input.py" "$SRC" "$REPEAT" "$WORK/predict.json" "$WORK/train.json"
V2=0
grep -q '"is_impossible"' "$WORK/predict.json" && V2=1
echo "input: $SRC x $REPEAT: predict.json $(wc -c < "$WORK/predict.json") bytes, train.json $(wc -c < "$WORK/train.json") bytes, version_2_with_negative=$V2; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
now() { date +%s.%N; }
run() {  # run est|python mode -> appends "whole inner" to $WORK/<prog>.<mode>
  if [ "$1" = est ]; then
    t0=$(now)
    line=$("$EST" --vocab_file "$VOCAB" --input "$WORK/$2.json" --output "$WORK/est.$2.tf_record" --mode "$2" \
      --version_2_with_negative $V2)
  else
    [ "$V2" = 1 ] && flag=--version_2_with_negative || flag=
    t0=$(now)
    line=$("$PY" "$HERE/squad_features_py.py" --vocab_file "$VOCAB" --input "$WORK/$2.json" \
      --output "$WORK/python.$2.tf_record" --mode "$2" $flag 2>/dev/null)
  fi
  t1=$(now)
  echo "$line" >&2
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $(echo "$line" | awk '{print $(NF-1)}')" >> "$WORK/$1.$2"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for mode in train predict; do
  r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    if [ $((r % 2)) -eq 0 ]; then run est $mode; run python $mode; else run python $mode; run est $mode; fi
    "$PY" "$HERE/squad_records_equal.py" "$WORK/est.$mode.tf_record" "$WORK/python.$mode.tf_record" 2>/dev/null \
      > "$WORK/equal" || { cat "$WORK/equal"; exit 1; }
    r=$((r + 1))
  done
  echo "$mode: records $(cat "$WORK/equal")"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-8s %12s %12s %8s   %12s %12s %8s   (median of %s rounds)\n" mode "est whole s" "python whole" ratio \
  "est inner s" "python inner" ratio "$ROUNDS"
for mode in train predict; do
  ew=$(cut -d' ' -f1 "$WORK/est.$mode" | median); pw=$(cut -d' ' -f1 "$WORK/python.$mode" | median)
  ei=$(cut -d' ' -f2 "$WORK/est.$mode" | median); pi=$(cut -d' ' -f2 "$WORK/python.$mode" | median)
  printf "%-8s %12.3f %12.3f %7.1fx   %12.3f %12.3f %7.1fx\n" $mode "$ew" "$pw" \
    "$(awk -v a="$pw" -v b="$ew" 'BEGIN { print a / b }')" "$ei" "$pi" "$(awk -v a="$pi" -v b="$ei" 'BEGIN { print a / b }')"
done
