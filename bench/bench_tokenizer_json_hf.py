"""HuggingFace `tokenizers` (PyPI), the peer of bench_tokenizer_json.sh: Tokenizer.from_file and
encode_batch(lines) (special tokens added, no truncation or padding, as bench_tokenizer_json) on
RAYON_NUM_THREADS threads, best of REPEATS.

    RAYON_NUM_THREADS=1 python bench_tokenizer_json_hf.py TOKENIZER_JSON LINES [REPEATS] [IDS_OUT]

    python bench_tokenizer_json_hf.py --lines N OUT   # writes make interop's N generated lines
"""
import os
import sys
import time


def write_lines(n, out):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
    os.environ.setdefault("EST_BIN", "/bin/true")  # conftest wants one; the generator does not run est
    from test_tokenizers import text_lines
    with open(out, "w", encoding="utf-8") as f:
        for line in text_lines(n):
            f.write(line.replace("\n", " ") + "\n")


def main():
    if sys.argv[1] == "--lines":
        write_lines(int(sys.argv[2]), sys.argv[3])
        return
    from tokenizers import Tokenizer
    path, lines_file = sys.argv[1:3]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    t0 = time.perf_counter()
    tok = Tokenizer.from_file(path)
    load = time.perf_counter() - t0
    tok.no_truncation()
    tok.no_padding()
    with open(lines_file, encoding="utf-8", newline="\n") as f:
        text = f.read()
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    best, encs = 1e30, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        encs = tok.encode_batch(lines)
        best = min(best, time.perf_counter() - t0)
    ids = sum(len(e.ids) for e in encs)
    threads = os.environ.get("RAYON_NUM_THREADS", "all")
    print(f"hf: {len(lines)} lines, {len(text.encode('utf-8'))} bytes, {ids} ids, {threads} thread(s): best of "
          f"{repeats} {best:.4f} s = {len(lines) / best:.0f} lines/s (load {load:.3f} s)")
    if len(sys.argv) > 4:
        with open(sys.argv[4], "w") as f:
            for e in encs:
                f.write(" ".join(map(str, e.ids)) + "\n")


if __name__ == "__main__":
    main()
