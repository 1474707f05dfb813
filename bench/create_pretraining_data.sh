#!/usr/bin/env bash
# create_pretraining_data speed: est against google-research/bert's create_pretraining_data.py
# on the same corpus and flags, then a record-by-record check that both wrote the same
# features.
#
#   bench/create_pretraining_data.sh [BUILD_DIR]
#
# Corpus: the 67,349 sentences of data/SST-2/train.tsv in documents of 2 to 8 sentences
# (a blank line between; made by bench/pretraining_records.py corpus). Flags: the script's
# defaults (max_seq_length 128, 20 predictions, dupe_factor 10, seed 12345), uncased vocab.
# Environment:
#   BERT_REPO  where to clone google-research/bert from (default its GitHub URL)
#   PYTHON     a Python with TensorFlow (default .venv/bin/python, created with
#              `pip install tensorflow-cpu` when missing; .venv/ is ignored by git)
#   DUPE       --dupe_factor (default 10)
# The script is run unchanged except `import tensorflow as tf` -> `import tensorflow.compat.v1
# as tf` (in it and tokenization.py), which TF 2 needs for tf.flags/gfile/python_io.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bert_repo="${BERT_REPO:-https://github.com/google-research/bert}"
python="${PYTHON:-$root/.venv/bin/python}"
dupe="${DUPE:-10}"
vocab="$root/data/vocab.txt"

if [ ! -x "$build/est" ]; then cmake --build "$build" --target est >/dev/null; fi
if [ ! -x "$python" ] || ! "$python" -c "import tensorflow" 2>/dev/null; then
  if [ -n "${PYTHON:-}" ]; then echo "PYTHON=$python has no tensorflow" >&2; exit 1; fi
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/pip" install -q tensorflow-cpu
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$bert_repo" "$work/bert"
(cd "$work/bert" && sed -i 's/^import tensorflow as tf$/import tensorflow.compat.v1 as tf/' \
   create_pretraining_data.py tokenization.py)
python3 "$root/bench/pretraining_records.py" corpus "$root/data/SST-2/train.tsv" "$work/corpus.txt"
flags=(--input_file="$work/corpus.txt" --vocab_file="$vocab" --do_lower_case=True --max_seq_length=128
       --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor="$dupe")
echo "corpus: $(wc -l < "$work/corpus.txt") lines, $(wc -c < "$work/corpus.txt") bytes; dupe_factor $dupe"

# Wall and CPU (user + system) seconds of each side; CPU time is the steadier figure on a
# shared machine.
timed() { local out="$1"; shift; /usr/bin/time -f "%e %U %S" -o "$out" "$@"; }
timed "$work/est.time" "$build/est" create_pretraining_data "${flags[@]}" --output_file="$work/est.tfrecord" \
  2> "$work/est.log"
(cd "$work/bert" && TF_CPP_MIN_LOG_LEVEL=2 timed "$work/script.time" "$python" create_pretraining_data.py \
   "${flags[@]}" --output_file="$work/script.tfrecord" > "$work/script.log" 2>&1)
# The script's fixed cost: starting Python and importing TensorFlow.
timed "$work/import.time" "$python" -c "import tensorflow" 2>/dev/null

grep "Wrote" "$work/est.log" | tail -1
read -r e_wall e_usr e_sys < "$work/est.time"
read -r s_wall s_usr s_sys < "$work/script.time"
read -r i_wall i_usr i_sys < "$work/import.time"
awk -v ew="$e_wall" -v ec="$(echo "$e_usr + $e_sys" | bc -l)" \
    -v sw="$s_wall" -v sc="$(echo "$s_usr + $s_sys" | bc -l)" \
    -v iw="$i_wall" -v ic="$(echo "$i_usr + $i_sys" | bc -l)" 'BEGIN {
  printf "est:    %8.2f s wall, %8.2f s CPU\n", ew, ec
  printf "script: %8.2f s wall, %8.2f s CPU (python + import tensorflow alone: %.2f s wall, %.2f s CPU)\n", sw, sc, iw, ic
  printf "speed ratio (script / est): %.1fx wall, %.1fx CPU; without the import: %.1fx wall, %.1fx CPU\n",
         sw / ew, sc / ec, (sw - iw) / ew, (sc - ic) / ec }'
python3 "$root/bench/pretraining_records.py" compare "$work/est.tfrecord" "$work/script.tfrecord"
