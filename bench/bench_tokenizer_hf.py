"""HuggingFace `tokenizers` from PyPI (the Python package most users call), the second peer of
bench_tokenizer.sh: the same BertWordPieceTokenizer setup as bench_tokenizer_hf.js (BERT
normalizer with lower-casing + accent stripping, BERT pre-tokenizer, WordPiece with
max_input_chars_per_word 200, no [CLS]/[SEP]) on one thread (RAYON_NUM_THREADS=1). Times
encode_batch over all sentences, best of REPEATS.

    python bench_tokenizer_hf.py VOCAB SENTENCES IDS_OUT [REPEATS]
"""
import sys
import time

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers


def main():
    vocab, sentences, ids_out = sys.argv[1:4]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    tok = Tokenizer(models.WordPiece.from_file(vocab, unk_token="[UNK]", max_input_chars_per_word=200))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    with open(sentences, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    best, encs = 1e30, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        encs = tok.encode_batch(lines, add_special_tokens=False)
        best = min(best, time.perf_counter() - t0)
    nids = 0
    with open(ids_out, "w") as f:
        for e in encs:
            nids += len(e.ids)
            f.write(" ".join(map(str, e.ids)) + "\n")
    nbytes = len(text.encode("utf-8"))
    print(f"hf-py: {len(lines)} sentences, {nbytes} bytes, {nids} ids: best of {repeats} {best:.4f} s = "
          f"{round(len(lines) / best)} sentences/s, {nbytes / best / 1e6:.1f} MB/s")


if __name__ == "__main__":
    main()
