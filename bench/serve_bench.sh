#!/bin/sh
# `est serve` against PyTorch + FastAPI + uvicorn (bench/serve_torch.py), side by side: the same
# exported BERT-Tiny-shaped classifier (data/bert_config.json), the same :predict request (one
# 16-token sentence, bench/serve_post.lua), wrk at 1, 8 and 64 connections for BENCH_SECONDS
# (default 10) each. Prints requests/s, p50 and p99 latency per side and the ratios.
#
#   sh bench/serve_bench.sh [BUILD_DIR] [THREADS]
#   BENCH_MODEL=base BENCH_CONNS=1 sh bench/serve_bench.sh   # BERT-Base shape, one connection
#   BENCH_MODE=overload sh bench/serve_bench.sh              # est alone, 4x its sustained load
#   BENCH_MODE=sustained BENCH_SECONDS=600 sh bench/serve_bench.sh   # est alone, 10 minutes
#   BENCH_MODE=precision BENCH_MODEL=base BENCH_CONNS=1 sh bench/serve_bench.sh   # est fp32 vs bf16
#   BENCH_MODE=precision BENCH_OTHER=int8 BENCH_MODEL=base BENCH_CONNS=64 sh bench/serve_bench.sh  # fp32 vs int8
#
# precision: est alone, --precision=fp32 then --precision=BENCH_OTHER (bf16, or int8) on the
# same export, wrk at each of CONNS; requests/s, p50, p99 and peak RSS per precision, and the
# second's ratios.
# overload: est with a queue of one batch (--max_enqueued_batches=1), first 64 connections
# for its sustained rate R, then 512 connections each pausing so that together they offer
# about 4R (bench/serve_codes.lua counts the answers by status). It must answer only 200s
# and 503s (the queue full), with no socket error, stay up, and keep its RSS flat (sampled
# from /proc every second: start, end, max).
# sustained: est at 64 connections for BENCH_SECONDS, its RSS every BENCH_RSS_EVERY (30) s;
# every answer must be a 200 and the RSS from BENCH_WARMUP (60) s on within 5% of its value then.
#
# Needs Debian's wrk, python3-torch, python3-fastapi and python3-uvicorn. est runs with
# --enable_batching --max_batch_size=64 --batch_timeout_micros=500; both sides get THREADS
# (default 2) math threads. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for both.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
THREADS=${2:-2}
DUR=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNS:-1 8 64}
MODEL=${BENCH_MODEL:-tiny}
MODE=${BENCH_MODE:-compare}
OTHER=${BENCH_OTHER:-bf16}   # precision mode: fp32 against this (bf16 or int8)
EST=$BUILD/est
PY=/usr/bin/python3   # Debian's, where python3-torch/fastapi/uvicorn live
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
# Debian's OpenBLAS falls back to its generic Prescott (SSE3) kernels on a CPU it does not
# recognise (e.g. a VM's "Intel Xeon Processor"), ~5x slower; both sides use OpenBLAS, so
# both then get the AVX-512 kernels, and the script says so.
BLAS_NOTE="OpenBLAS core detected"
if OPENBLAS_VERBOSE=2 "$BUILD/est" --version 2>&1 | grep -q "Core: Prescott" && grep -q avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
  BLAS_NOTE="OPENBLAS_CORETYPE=SkylakeX for both (OpenBLAS did not recognise this AVX-512 CPU)"
fi
command -v wrk >/dev/null || { echo "serve_bench: wrk is needed (apt-get install wrk)" >&2; exit 1; }
W=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"' EXIT

# The model: one training step from scratch (the weights do not matter for speed), exported.
CONFIG=data/bert_config.json
if [ "$MODEL" = base ]; then
  CONFIG="$W/bert_base.json"
  printf '{"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
 "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
 "num_hidden_layers": 12, "type_vocab_size": 2, "vocab_size": 30522}\n' > "$CONFIG"
fi
"$EST" run_classifier --task_name=sst-2 --do_train --do_export --data_dir=tests/data/glue_mini/SST-2 \
  --vocab_file=data/vocab.txt --bert_config_file="$CONFIG" --max_seq_length=128 \
  --train_batch_size=8 --num_train_epochs=1 --num_threads="$THREADS" --output_dir="$W/run" >/dev/null 2>&1
VERSION=$(ls -d "$W"/run/export/[0-9]* | tail -1)
"$EST" ckpt convert "$VERSION/variables/variables" "$W/weights.safetensors" >/dev/null

# wrk NAME PORT CONNECTIONS -> "rps p50 p99" (latencies in ms)
run_wrk() {
  t=2; [ "$3" -lt 2 ] && t=1
  wrk -t"$t" -c"$3" -d"${DUR}s" --latency -s bench/serve_post.lua "http://127.0.0.1:$2/v1/models/bench:predict" \
    > "$W/wrk_$1_$3.txt"
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec:/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /Non-2xx/ { bad = $NF }
    END { printf "%.1f %.2f %.2f %d\n", rps, p50, p99, bad }' "$W/wrk_$1_$3.txt"
}

# rss_sampler PID EVERY FILE: appends "SECONDS KIB" lines until PID exits (run it with &).
rss_sampler() {
  t0=$(date +%s)
  while kill -0 "$1" 2>/dev/null; do
    r=$(awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null) || break
    [ -n "$r" ] && echo "$(( $(date +%s) - t0 )) $r" >> "$3"
    sleep "$2"
  done
}
# rss_summary FILE -> "start S MiB, end E MiB, max M MiB" (of the samples in FILE)
rss_summary() {
  awk 'NR == 1 { s = $2 } { e = $2; if ($2 > m) m = $2 }
       END { printf "start %.1f MiB, end %.1f MiB, max %.1f MiB", s / 1024, e / 1024, m / 1024 }' "$1"
}
# codes_summary WRK_OUTPUT -> "ok N 503 N other N sockerr N" (serve_codes.lua's lines + wrk's errors)
codes_summary() {
  awk '/^status 200 / { ok += $3; next } /^status 503 / { busy += $3; next } /^status / { other += $3 }
       /Socket errors:/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
       END { printf "%d %d %d %d\n", ok, busy, other, err }' "$1"
}

# start_est EXTRA_FLAGS...: starts est serve on a free port (EST_PID, EST_PORT)
start_est() {
  rm -f "$W/est.out"
  "$EST" serve --model_base_path="$W/run/export" --model_name=bench --rest_api_port=0 --num_threads="$THREADS" \
    --enable_batching --max_batch_size=64 --batch_timeout_micros=500 --file_system_poll_wait_seconds=0 "$@" \
    > "$W/est.out" 2> "$W/est.err" &
  EST_PID=$!
  PIDS="$EST_PID"
  while ! grep -q "listening on" "$W/est.out" 2>/dev/null; do
    kill -0 "$EST_PID" 2>/dev/null || { cat "$W/est.err" >&2; exit 1; }
    sleep 0.1
  done
  EST_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$W/est.out")
}
URL_PATH=/v1/models/bench:predict

if [ "$MODE" = overload ]; then
  start_est --max_enqueued_batches=1 --max_connections=1024
  rss_sampler "$EST_PID" 1 "$W/rss.txt" &
  set -- $(run_wrk est "$EST_PORT" 64)
  R=$1
  # 512 connections, each waiting DELAY ms (whole ms: wrk) after each answer: together at
  # least 4R requests/s offered, whatever the answer (the ratio is printed).
  # (the pause is aimed at 8R because each connection also waits for its answers)
  DELAY=$(awk -v r="$R" 'BEGIN { d = 512 * 1000 / (8 * (r > 0 ? r : 1)); printf "%d", d < 1 ? 1 : d + 0.5 }')
  N0=$(wc -l < "$W/rss.txt")
  SERVE_DELAY_MS=$DELAY wrk -t2 -c512 -d"${DUR}s" --timeout 30s -s bench/serve_codes.lua \
    "http://127.0.0.1:$EST_PORT$URL_PATH" > "$W/overload.txt"
  set -- $(codes_summary "$W/overload.txt")
  OK=$1 BUSY=$2 OTHER=$3 SOCKERR=$4
  ALIVE=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$EST_PORT/v1/models/bench")
  sleep 1.5   # one more RSS sample after the load
  tail -n +"$((N0 + 1))" "$W/rss.txt" > "$W/rss_overload.txt"
  kill "$EST_PID"; wait "$EST_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "serve bench (overload): BERT-$MODEL shape, est --max_enqueued_batches=1 (queue 64 examples), ${DUR}s per row, $THREADS threads"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $BLAS_NOTE"
  echo "sustained at 64 connections: $R req/s (all 200)"
  awk -v ok="$OK" -v busy="$BUSY" -v other="$OTHER" -v err="$SOCKERR" -v d="$DUR" -v r="$R" -v delay="$DELAY" 'BEGIN {
    offered = (ok + busy + other) / d
    printf "4x overload, 512 connections pausing %s ms: offered %.1f req/s (%.1fx), answered 200: %.1f/s, 503: %.1f/s, other status: %d, socket errors: %d\n",
           delay, offered, offered / (r > 0 ? r : 1), ok / d, busy / d, other, err }'
  echo "after the overload: GET status -> $ALIVE; est serve RSS before any load $(awk 'NR == 1 { printf "%.1f MiB", $2 / 1024 }' "$W/rss.txt"), during the overload $(rss_summary "$W/rss_overload.txt") (sampled every 1 s)"
  [ "$OTHER" -eq 0 ] && [ "$SOCKERR" -eq 0 ] && [ "$ALIVE" = 200 ] || { echo "serve_bench: overload FAILED" >&2; exit 1; }
  exit 0
fi

if [ "$MODE" = precision ]; then
  for prec in fp32 "$OTHER"; do
    start_est --precision="$prec"
    for c in $CONNS; do echo "$prec $c $(run_wrk "est_$prec" "$EST_PORT" $c)"; done > "$W/$prec.res"
    echo "$(awk '/VmHWM/ {print $2}' /proc/$EST_PID/status)" > "$W/$prec.rss"
    kill "$EST_PID"; wait "$EST_PID" 2>/dev/null || true
  done
  echo "serve bench (precision): BERT-$MODEL shape, est --precision fp32 and $OTHER, 1 sentence of 16 tokens per request, ${DUR}s per row, $THREADS threads"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $BLAS_NOTE; $OTHER on: $(grep -o 'on AMX tiles\|on AVX512-BF16\|on AVX512-VNNI\|on AVX-VNNI' "$W/est.err" | head -1)"
  printf "%-6s %11s %11s %9s %9s %9s %9s %9s\n" conns fp32_req/s "${OTHER}_req/s" ratio fp32_p50 "${OTHER}_p50" fp32_p99 "${OTHER}_p99"
  paste "$W/fp32.res" "$W/$OTHER.res" | awk '{
    printf "%-6s %11.1f %11.1f %8.2fx %7.2fms %7.2fms %7.2fms %7.2fms\n", $2, $3, $9, $9 / ($3 > 0 ? $3 : 1), $4, $10, $5, $11 }'
  echo "peak RSS: fp32 $(( $(cat "$W/fp32.rss") / 1024 )) MiB, $OTHER $(( $(cat "$W/$OTHER.rss") / 1024 )) MiB"
  exit 0
fi

if [ "$MODE" = sustained ]; then
  EVERY=${BENCH_RSS_EVERY:-30}
  start_est
  rss_sampler "$EST_PID" "$EVERY" "$W/rss.txt" &
  wrk -t2 -c64 -d"${DUR}s" --timeout 30s --latency -s bench/serve_codes.lua "http://127.0.0.1:$EST_PORT$URL_PATH" \
    > "$W/sustained.txt"
  set -- $(codes_summary "$W/sustained.txt")
  OK=$1 BUSY=$2 OTHER=$3 SOCKERR=$4
  ALIVE=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$EST_PORT/v1/models/bench")
  sleep "$EVERY"   # the sample after the load
  kill "$EST_PID"; wait "$EST_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "serve bench (sustained): BERT-$MODEL shape, est at 64 connections for ${DUR}s, $THREADS threads"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $BLAS_NOTE"
  echo "requests/s: $(awk '/Requests\/sec:/ {print $2}' "$W/sustained.txt"); answered 200: $OK; 503: $BUSY; other status: $OTHER; socket errors: $SOCKERR; GET status after: $ALIVE"
  echo "RSS every ${EVERY}s (seconds MiB):"
  awk '{ printf "  %5d %7.1f\n", $1, $2 / 1024 }' "$W/rss.txt"
  # flat: every sample from BENCH_WARMUP (60) seconds on within 5% of the first of them (the
  # first samples see the 64 connections' threads and the batch buffers appear; on a loaded
  # machine that took more than 30 s)
  awk -v warm="${BENCH_WARMUP:-60}" '$1 >= warm && !n { f = $2; lo = $2; hi = $2; t = $1; n = 1; next }
       n { if ($2 < lo) lo = $2; if ($2 > hi) hi = $2 }
       END { if (!n) exit 1
             d = (hi - f > f - lo ? hi - f : f - lo) / f * 100
             printf "RSS: at %ds %.1f MiB, from then on min %.1f, max %.1f: %.1f%% from it (flat means <= 5%%)\n", t, f / 1024, lo / 1024, hi / 1024, d
             exit (d <= 5 ? 0 : 1) }' "$W/rss.txt" || { echo "serve_bench: RSS not flat" >&2; exit 1; }
  [ "$BUSY" -eq 0 ] && [ "$OTHER" -eq 0 ] && [ "$SOCKERR" -eq 0 ] && [ "$ALIVE" = 200 ] ||
    { echo "serve_bench: sustained load had errors" >&2; exit 1; }
  exit 0
fi

start_est
rss_sampler "$EST_PID" 1 "$W/rss.txt" &
for c in $CONNS; do echo "est $c $(run_wrk est "$EST_PORT" $c)"; done > "$W/est.res"
EST_RSS=$(awk '/VmHWM/ {print $2}' /proc/$EST_PID/status)
kill "$EST_PID"; wait "$EST_PID" 2>/dev/null || true
wait 2>/dev/null || true

PEER_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
EST_EXPORT="$VERSION" EST_WEIGHTS="$W/weights.safetensors" TORCH_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" \
  "$PY" -m uvicorn serve_torch:app --app-dir bench --host 127.0.0.1 --port "$PEER_PORT" --log-level warning \
  > "$W/peer.out" 2>&1 &
PEER_PID=$!
PIDS="$PEER_PID"
until curl -s -o /dev/null -d '{"instances": ["x"]}' "http://127.0.0.1:$PEER_PORT/v1/models/bench:predict"; do
  kill -0 "$PEER_PID" 2>/dev/null || { cat "$W/peer.out" >&2; exit 1; }
  sleep 0.2
done
for c in $CONNS; do echo "peer $c $(run_wrk peer "$PEER_PORT" $c)"; done > "$W/peer.res"
PEER_RSS=$(awk '/VmHWM/ {print $2}' /proc/$PEER_PID/status)

echo "serve bench: BERT-$MODEL shape, 1 sentence of 16 tokens per request, ${DUR}s per row, $THREADS threads"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $BLAS_NOTE"
printf "%-6s %12s %12s %9s %9s %9s %9s %8s %8s\n" conns est_req/s torch_req/s ratio est_p50 torch_p50 est_p99 torch_p99 non2xx
paste "$W/est.res" "$W/peer.res" | awk '{
  printf "%-6s %12.1f %12.1f %8.1fx %7.2fms %7.2fms %7.2fms %7.2fms %4d/%d\n", $2, $3, $9, $3 / ($9 > 0 ? $9 : 1), $4, $10, $5, $11, $6, $12 }'
echo "peak RSS: est serve $((EST_RSS / 1024)) MiB, uvicorn+torch $((PEER_RSS / 1024)) MiB; est serve RSS over its rows: $(rss_summary "$W/rss.txt")"
