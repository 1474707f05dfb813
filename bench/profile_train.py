#!/usr/bin/env python3
"""Sorts the samples of `perf record --call-graph dwarf` of bench_bert's training steps into
the categories of issue 50 and prints one table row per category: its share of the process's
user CPU time, its CPU-milliseconds per step and, where its FLOPs are known, the share of the
fp32 FMA ceiling those milliseconds reached.

    perf script -i perf.data -F tid,pid,time,ip,sym,dso | bench/profile_train.py --model small \
        --precision fp32 --iters 3 --peak-core 172.4 [--batch 32 --seq 128]

bench/profile_train.sh runs perf and this script for every model and precision. The rules
(OUTER, LEAF and categorize() below) go from a sample's call chain (leaf first) to a category:

- a name anywhere in the chain decides first (the optimizer's, the clipping's, attention's,
  LayerNorm's, dropout's, ...), with OpenMP's outlined copies ("f._omp_fn.2") read as f;
- a weight GEMM's role comes from the chain too: est_matmul_forward*/est_ffn_forward mean
  forward, est_matmul_backward* mean a gradient. Which gradient: OpenBLAS's driver names it
  (row-major NN -> sgemm_nn, NT (dinp) -> sgemm_tn, TN (dW) -> sgemm_nt); est's own fp32
  kernel takes Trans A (dW) in kernel_cols, NoTrans A in kernel_rows;
- a chain that stops short of the caller (a worker thread's ends in libgomp, above the GEMM's
  own parallel region; the unwinder loses run_item's 37 KiB frame) takes the phase of the
  step the latest full chain showed (forward, or backward): a NoTrans-A product in the
  backward is an input gradient; AMX's gradient products, whose kernel does not show
  whether A was transposed, are split evenly between the two gradients (equal FLOPs);
- packing (pack_b, pack_a_trans, copy_rows_apart, pack_tile, OpenBLAS's *copy) is one row
  whatever the role; a GELU fused into a GEMM's epilogue counts in that GEMM.
"""
import argparse
import collections
import re
import sys

# the leaf's name (OpenMP suffix removed) -> category, where no name of the chain is in OUTER
LEAF = {
    "awd_update": "optimizer", "adam_update": "optimizer", "momentum_update": "optimizer",
    "sum_squares": "clipping", "chunked_global_norm": "clipping",
    "masked_softmax_rows": "softmax forward (attention)",
    "fill_mask": "dropout masks (Philox)", "est_philox4x32": "dropout masks (Philox)",
    "est_dropout_mask": "dropout masks (Philox)",
    "pack_b": "packing", "pack_a_trans": "packing", "copy_rows_apart": "packing",
    "pack_tile": "packing", "pack_tiles": "packing", "transpose16": "packing",
    "words_of_rows": "packing", "words_of_row_pairs": "packing", "pack_b_tiles": "packing",
    "bias_grad": "bias gradients",
    "est_vars_zero_grads": "zeroing gradients",
}
# names that decide wherever they are in the chain, before the leaf: a whole op's region
OUTER = [
    ("chunked_global_norm", "clipping"),
    ("est_optimizer_global_norm", "clipping"),
    ("est_optimizer_apply", "optimizer"),
    ("est_vars_zero_grads", "zeroing gradients"),
    ("est_attention_backward_mode", "attention backward"),
    ("est_attention_forward_at", "attention forward"),
    ("est_layernorm_backward_mode", "LayerNorm backward"),
    ("est_layernorm_forward", "LayerNorm forward"),
    ("est_layernorm_forward_eps", "LayerNorm forward"),
    ("est_layernorm_forward_residual_eps", "LayerNorm forward"),
    ("est_dropout_backward_mode", "dropout backward"),
    ("est_dropout_forward_at", "dropout forward"),
    ("est_activation_backward_mode", "GELU/tanh backward (unfused)"),
    ("est_activation_forward", "GELU/tanh forward (unfused)"),
    ("est_embeddings_backward_ex", "embeddings + loss + head"),
    ("est_embeddings_forward_ex", "embeddings + loss + head"),
]
GEMM_KERNELS = {"kernel_rows": "own", "kernel_cols": "own_trans", "kernel_body": "own", "run_item": "own",
                "block32": "amx", "run_blocks": "amx", "gelu_block": "amx", "gelu_backward_block": "amx",
                "est_sgemm_amx": "amx"}
OPENBLAS_ROLE = {"sgemm_nn": "forward", "sgemm_tn": "input gradient", "sgemm_nt": "weight gradient",
                 "sgemm_tt": "weight gradient"}
FORWARD_CALLERS = ("est_matmul_forward", "est_matmul_forward_shared", "est_matmul_forward_gelu", "est_ffn_forward")
BACKWARD_CALLERS = ("est_matmul_backward", "est_matmul_backward_mode", "est_matmul_backward_gelu")


def base(sym):
    sym = sym.split("._omp_fn")[0]
    return re.sub(r"\.(constprop|isra|part|cold)(\.\d+)?$", "", re.sub(r"\.(constprop|isra|part)\.\d+", "", sym))


def categorize(chain, dso_leaf):
    """-> (category, GEMM kernel family or None)"""
    names = [base(s) for s in chain]
    for n in names:  # whole ops first (their inner products and masks included)
        for key, cat in OUTER:
            if n == key:
                if cat.startswith("attention") and names[0] in LEAF and LEAF[names[0]] != "packing":
                    return LEAF[names[0]], None
                if cat == "attention backward" and names[0] == "est_attention_backward_mode":
                    return "softmax + dropout backward (attention)", None
                return cat, None
    leaf = names[0] if names else ""
    if leaf in LEAF:
        return LEAF[leaf], None
    # weight GEMMs
    for n in names:
        if n in OPENBLAS_ROLE:
            if leaf.startswith("sgemm_") and ("copy" in leaf or "beta" in leaf):
                return "packing", None
            return "weight GEMM, " + OPENBLAS_ROLE[n], None
    fam = next((GEMM_KERNELS[n] for n in names if n in GEMM_KERNELS), None)
    if fam or any(n.startswith("sgemm_kernel") for n in names):
        fam = fam or "blas"
        if fam == "own_trans":
            return "weight GEMM, weight gradient", None
        if any(n in FORWARD_CALLERS for n in names):
            return "weight GEMM, forward", fam
        if any(n in BACKWARD_CALLERS for n in names):
            if fam == "amx":  # Trans A (dW) or not: the packing of A says, not the kernel
                return "weight GEMM, gradient (amx)", fam
            return "weight GEMM, input gradient", fam
        return "GEMM, caller unknown", fam
    if "libgomp" in dso_leaf or leaf.startswith("GOMP_") or leaf.startswith("gomp_"):
        return "OpenMP barriers and runtime", None
    if leaf.startswith("__mem") or leaf.startswith("memcpy") or leaf.startswith("memset"):
        return "other copies (memcpy/memset)", None
    if any("xent" in n or "crossentropy" in n or "classifier" in n or "embedding" in n for n in names):
        return "embeddings + loss + head", None
    return "other", None


FORWARD_PHASE = ("est_bert_encoder_forward", "enc_layers_forward") + FORWARD_CALLERS
BACKWARD_PHASE = ("est_bert_encoder_backward", "layer_backward") + BACKWARD_CALLERS


def read_samples(stream):
    """perf script -F tid,pid,time,ip,sym,dso output, time-ordered: a header line
    'pid/tid time:', then frames 'ip sym (dso)'; yields (is_main_thread, [sym...], leaf dso)."""
    head, chain, dso = None, [], ""
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if head is not None:
                yield head, chain, dso
            head, chain, dso = None, [], ""
            continue
        if not line.startswith("\t"):  # a header ('pid/tid time:', right-aligned) or a frame (a tab)
            ids = line.split()[0]
            pid, tid = ids.split("/")[:2] if "/" in ids else (ids, ids)
            head = pid == tid
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            if not chain:
                dso = m.group(2)
            chain.append(re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)))
    if head is not None:
        yield head, chain, dso


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--iters", type=int, required=True)
    ap.add_argument("--peak-core", type=float, required=True, help="bench_peak's fp32 GFLOP/s per core")
    ap.add_argument("--period-ms", type=float, default=1.0, help="CPU ms per sample (perf -c 1000000 on cpu-clock)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--others", type=int, default=6, help="symbols listed under 'other'")
    a = ap.parse_args()
    L, H = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "base": (12, 768)}[a.model]
    I, B, S = 4 * H, a.batch, a.seq
    T = B * S
    dense = L * 2.0 * T * (4 * H * H + 2 * H * I)  # one of forward, dinp, dW
    flops = {"weight GEMM, forward": dense, "weight GEMM, input gradient": dense,
             "weight GEMM, weight gradient": dense,
             # the forward's two products, run again in the backward (probabilities recomputed)
             "attention forward": 2 * L * 4.0 * B * S * S * H,
             "attention backward": L * 8.0 * B * S * S * H}

    counts = collections.Counter()
    others = collections.Counter()
    blas = collections.Counter()  # OpenBLAS samples by driver, kernel or copies
    total, phase = 0, None
    for is_main, chain, dso in read_samples(sys.stdin):
        total += 1
        names = [base(c) for c in chain]
        if any(n in BACKWARD_PHASE for n in names):
            phase = "backward"
        elif any(n in FORWARD_PHASE for n in names):
            phase = "forward"
        cat, fam = categorize(chain, dso)
        drv = next((n for n in names if n in OPENBLAS_ROLE), None)
        if drv:
            blas[drv + (" copies" if cat == "packing" else " kernel")] += 1
        if cat == "GEMM, caller unknown" and phase == "forward":
            cat = "weight GEMM, forward"
        elif cat == "GEMM, caller unknown" and phase == "backward":
            cat = "weight GEMM, gradient (amx)" if fam == "amx" else "weight GEMM, input gradient"
        if cat == "other":
            others[names[0] if names else "?"] += 1
        counts[cat] += 1
    # AMX gradients: dinp and dW share block32; split them by their FLOPs' ratio (equal)
    amx = counts.pop("weight GEMM, gradient (amx)", 0)
    if amx:
        counts["weight GEMM, input gradient"] += amx / 2
        counts["weight GEMM, weight gradient"] += amx / 2
    note_amx = amx > 0
    if total == 0:
        sys.exit("profile_train.py: no samples")
    cpu_ms_step = total * a.period_ms / a.iters
    step_flops = 3 * (dense + L * 4.0 * B * S * S * H)
    print(f"# {a.model} {a.precision}: {total} samples, {cpu_ms_step:.1f} CPU-ms per step "
          f"(user time of all threads), whole step {100 * step_flops / (cpu_ms_step * 1e-3 * a.peak_core * 1e9):.0f}% "
          f"of the fp32 FMA ceiling per CPU-second ({a.peak_core:.1f} GFLOP/s per core)")
    print("| category | share of step CPU | CPU-ms/step | % of fp32 FMA ceiling |")
    print("|---|---|---|---|")
    for cat, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        ms = n * a.period_ms / a.iters
        eff = ""
        if cat in flops and n > 0:
            eff = f"{100 * flops[cat] / (ms * 1e-3 * a.peak_core * 1e9):.0f}%"
        print(f"| {cat} | {100 * n / total:.1f}% | {ms:.1f} | {eff} |")
    if note_amx:
        print("# AMX: the input- and weight-gradient products share the tile kernel; its samples"
              " without a Trans-A mark are split evenly (equal FLOPs)")
    if blas:
        print("# OpenBLAS, % of samples: " + ", ".join(f"{k} {100 * n / total:.1f}%" for k, n in sorted(blas.items())))
    if others:
        print("# other: " + ", ".join(f"{s} {100 * n / total:.1f}%" for s, n in others.most_common(a.others)))


if __name__ == "__main__":
    main()
