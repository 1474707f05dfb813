#!/bin/sh
# Where a training step's CPU time goes: `perf record` of bench_bert's timed steps (not its
# build, initialisation or warm-up: --perf-ctl), DWARF call chains, sorted into issue 50's
# categories by bench/profile_train.py; one table per model and precision. Shares are of the
# process's own user CPU time (cpu-clock:u), so other processes on the machine change them
# less than wall-clock shares: they still slow memory and caches, and under load the spinning
# of OpenMP's default waiting would be counted as barrier time, so the threads wait
# passively (OMP_WAIT_POLICY=PASSIVE, as bench/run_bert.sh), and time blocked in a barrier
# is not CPU time at all.
#
#   bench/profile_train.sh [BUILD_DIR] [MODELS] [PRECISIONS] [THREADS]
#   e.g. bench/profile_train.sh build "tiny mini small base" "fp32 bf16" 2
#
# Needs perf (linux-perf) with perf_event_paranoid <= 2 and python3. Each table's last column
# divides a category's FLOPs by its CPU-seconds and by bench_peak's fp32 FMA rate per core,
# measured at the start (the best of three runs, each the best of 5). Data files go to
# $PROFILE_DIR (default /tmp/est-profile) and are kept. docs/performance.md §6 reads them.
set -e
BUILD=${1:-build}
MODELS=${2:-"tiny mini small base"}
PRECISIONS=${3:-"fp32 bf16"}
THREADS=${4:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${PROFILE_DIR:-/tmp/est-profile}
mkdir -p "$DIR"
for x in bench_bert bench_peak; do
  [ -x "$BUILD/$x" ] || { echo "profile_train.sh: $BUILD/$x not found (build the $x target)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "profile_train.sh: perf not found" >&2; exit 1; }
# the ceiling: the highest of three bench_peak runs (time descheduled can only lower a run's
# figure, and under a load of 10 or more it fell to a fifth), or PEAK_CORE=GFLOP/s per core
# from a quiet moment
PEAK=${PEAK_CORE:-$(for r in 1 2 3; do "$BUILD/bench_peak" "$THREADS"; done |
  awk '/^fp32 FMA/ { for (i = 1; i < NF; i++) if ($(i + 1) == "GFLOP/s" && $(i + 2) == "per" && $i > p) p = $i }
       END { print p }')}
echo "# $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $THREADS threads, fp32 FMA ceiling $PEAK GFLOP/s per core (bench_peak), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in $MODELS; do
  # samples of 1 ms of CPU time for the small models, fewer for the large ones (a 64 KiB stack
  # copy each)
  case $model in
    tiny) iters=10 period=1000000 ;;
    mini) iters=5 period=1000000 ;;
    small) iters=3 period=2000000 ;;
    *) iters=2 period=5000000 ;;
  esac
  for prec in $PRECISIONS; do
    data="$DIR/$model-$prec.data" ctl="$DIR/ctl.fifo"
    rm -f "$ctl" && mkfifo "$ctl"
    line=$(perf record -q -D -1 --control "fifo:$ctl" -e cpu-clock:u -c "$period" --call-graph dwarf,65528 \
      -o "$data" env OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$THREADS" \
      "$BUILD/bench_bert" --model "$model" --mode train --precision "$prec" --threads "$THREADS" \
      --iters "$iters" --perf-ctl "$ctl" 2>/dev/null | grep '^est')
    echo "# $line; load $(cut -d' ' -f1-3 /proc/loadavg)"
    perf script -i "$data" -F tid,pid,time,ip,sym,dso 2>/dev/null |
      python3 "$HERE/profile_train.py" --model "$model" --precision "$prec" --iters "$iters" \
        --peak-core "$PEAK" --period-ms "$(awk -v p="$period" 'BEGIN { print p / 1e6 }')"
    echo
  done
done
