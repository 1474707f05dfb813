"""Peer for bench_ckpt: torch.save / torch.load of the same BERT-shaped float32 tensors.

    /usr/bin/python3 bench/ckpt_torch.py DIR [LAYERS HIDDEN VOCAB]

Saves a dict of 206 tensors (run_pretraining.py names and shapes) with torch.save, flushed
and fsync'ed like est's atomic writes, then loads it back from a warm page cache and copies
every tensor into one preallocated flat buffer (what a trainer restoring into its parameter
buffer does). Prints the same lines as bench_ckpt.
"""
import os
import sys
import time

import torch


def shapes(layers, h, vocab):
    out = [("bert/embeddings/word_embeddings", (vocab, h)),
           ("bert/embeddings/token_type_embeddings", (2, h)),
           ("bert/embeddings/position_embeddings", (512, h)),
           ("bert/embeddings/LayerNorm/beta", (h,)), ("bert/embeddings/LayerNorm/gamma", (h,))]

    def dense(scope, i, o):
        out.extend([(scope + "/kernel", (i, o)), (scope + "/bias", (o,))])

    def ln(scope):
        out.extend([(scope + "/beta", (h,)), (scope + "/gamma", (h,))])

    for l in range(layers):
        p = "bert/encoder/layer_%d/" % l
        for part in ("attention/self/query", "attention/self/key", "attention/self/value",
                     "attention/output/dense"):
            dense(p + part, h, h)
        ln(p + "attention/output/LayerNorm")
        dense(p + "intermediate/dense", h, 4 * h)
        dense(p + "output/dense", 4 * h, h)
        ln(p + "output/LayerNorm")
    dense("bert/pooler/dense", h, h)
    out.append(("cls/predictions/output_bias", (vocab,)))
    dense("cls/predictions/transform/dense", h, h)
    ln("cls/predictions/transform/LayerNorm")
    out.extend([("cls/seq_relationship/output_weights", (2, h)),
                ("cls/seq_relationship/output_bias", (2,))])
    return out


def report(what, secs, nbytes):
    print("%-28s %8.3f s %9.1f MB/s" % (what, secs, nbytes / secs / 1e6))


def main():
    d = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    h = int(sys.argv[3]) if len(sys.argv) > 3 else 768
    vocab = int(sys.argv[4]) if len(sys.argv) > 4 else 30522
    torch.set_num_threads(1)
    sh = shapes(layers, h, vocab)
    total = sum(int(torch.tensor(s).prod()) if s else 1 for _, s in sh)
    flat = (torch.arange(total, dtype=torch.int64) * 2654435761 % 1000).float() * 1e-3
    state, off = {}, 0
    for name, s in sh:
        n = int(torch.tensor(s).prod())
        state[name] = flat[off:off + n].view(*s)
        off += n
    nbytes = total * 4
    print("%d tensors, %d floats (%.1f MB)" % (len(sh), total, nbytes / 1e6))
    path = os.path.join(d, "model.pt")
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    report("torch.save (fsync)", time.perf_counter() - t0, nbytes)
    back = torch.zeros(total)
    # Twice, like bench_ckpt: the first load may read from disk, the second from cache.
    for rnd in ("1st", "2nd"):
        t0 = time.perf_counter()
        loaded = torch.load(path)
        off = 0
        for name, s in sh:
            n = loaded[name].numel()
            back[off:off + n].copy_(loaded[name].reshape(-1))
            off += n
        report("torch.load + copy (%s)" % rnd, time.perf_counter() - t0, nbytes)
        del loaded
    assert torch.equal(back, flat)


if __name__ == "__main__":
    main()
