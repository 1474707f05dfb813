#!/bin/sh
# table.sh RESULTS: the markdown table of bench/README.md's peers section from the lines
# bench/run_peers.sh appends to PEERS_RESULTS=RESULTS (tab-separated: model, mode, peer,
# precision, ex/s, GFLOP/s, share of peak, RSS MiB, the peak GFLOP/s it was shared of). One row per (model, contestant), inference
# and training side by side; "—" where a group was not run or the contestant has no such mode
# (ONNX Runtime: inference only). A contestant that failed shows 0.00 ex/s.
#
#   PEERS_RESULTS=/tmp/r.tsv sh bench/run_peers.sh ... && sh bench/peers/table.sh /tmp/r.tsv
set -eu
[ -r "${1:-}" ] || { echo "usage: table.sh RESULTS.tsv (bench/run_peers.sh's PEERS_RESULTS)" >&2; exit 1; }
awk -F '\t' '
  BEGIN {
    split("tiny mini small base", M, " ")
    name["tiny"] = "Tiny"; name["mini"] = "Mini"; name["small"] = "Small"; name["base"] = "Base"
    split("est-fp32 est-bf16 torch1.13-fp32 torch2-eager-fp32 torch2-compile-fp32 " \
          "torch2-eager-bf16 torch2-compile-bf16 ort-fp32", P, " ")
    label["est-fp32"] = "est fp32"; label["est-bf16"] = "est bf16"
    label["torch1.13-fp32"] = "torch 1.13 (Debian) fp32"
    label["torch2-eager-fp32"] = "torch 2.4.1 eager fp32"
    label["torch2-compile-fp32"] = "torch 2.4.1 compile fp32"
    label["torch2-eager-bf16"] = "torch 2.4.1 eager bf16 autocast"
    label["torch2-compile-bf16"] = "torch 2.4.1 compile bf16 autocast"
    label["ort-fp32"] = "ONNX Runtime 1.23.2 fp32"
  }
  { k = $1 SUBSEP $2 SUBSEP $3 "-" $4; v[k] = sprintf("%s | %s | %s", $5, $7, $8); seen[$1] = 1 }
  END {
    print "| model | contestant | infer ex/s | infer, share of peak | infer RSS MiB | train ex/s | train, share of peak | train RSS MiB |"
    print "|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= 4; i++) {
      m = M[i]
      if (!(m in seen)) continue
      for (j = 1; j <= 8; j++) {
        p = P[j]
        a = (m SUBSEP "infer" SUBSEP p) in v ? v[m, "infer", p] : "— | — | —"
        b = (m SUBSEP "train" SUBSEP p) in v ? v[m, "train", p] : "— | — | —"
        printf "| %s | %s | %s | %s |\n", name[m], label[p], a, b
      }
    }
  }' "$1"
