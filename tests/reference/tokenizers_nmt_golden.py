"""Goldens for tests/test_tokenizer_json.c's Nmt normalizer: the pipeline tokenizers'
SentencePieceUnigramTokenizer writes (normalizer Sequence[Nmt, NFKC, Replace(" {2,}", " ")],
Metaspace), built here with a small Unigram vocab, and its encodings of text full of the
control and space-like code points Nmt drops or maps, and of marks NFKC reorders and composes
(the offsets follow unicode-normalization-alignments' change stream).

    /tmp/tokvenv/bin/python tests/reference/tokenizers_nmt_golden.py tests/data/tokenizers

(a venv with tokenizers==0.22.1.) Writes nmt.json and nmt.tsv in golden.tsv's format:
`file<TAB>pair(0/1)<TAB>text_a<TAB>text_b<TAB>ids<TAB>type_ids<TAB>special_tokens_mask<TAB>offsets`.
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

INPUTS = [
    "plain text here",
    "tab\there\nline\rcarriage\x0cform",
    "ctl\x01\x02\x07\x08x\x0b\x0e\x1f\x7fy \x8f\x9fz",
    "zero\u200bwidth\u200c\u200d\u200e\u200fmarks \u2028 \u2029 \u1680 ogham",
    "bom\ufefftext repl\ufffdchar \u2581lower",
    "many     spaces   and ﬁ ligature ①",
    "\x01\x02",
    "reorder \u0638\u0651\u0650\u0637 a\u0301\u0323b e\u0301 o\u0308\u0301",
    "hangul \u1100\u1161\u11a8 \uac00\u11a8 ﬃ \u2460 \u00bd \u2122 \u1e9b\u0323",
    "marks first \u0301\u0301x \u0323\u0301",
    "",
]


def main(out):
    pieces = [("<unk>", 0.0)] + [(p, -float(i) / 10 - 1) for i, p in enumerate(
        ["\u2581", "\u2581t", "e", "x", "t", "a", "b", "h", "r", "i", "n", "l", "c", "o", "s", "p", "m", "w", "d",
         "f", "y", "z", "g", "\u2581text", "\u2581here", "\u2581space", "1", "k", "u", "\u2581fi"])]
    t = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=False))
    t.normalizer = normalizers.Sequence([normalizers.Nmt(), normalizers.NFKC(),
                                         normalizers.Replace(Regex(" {2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.save(os.path.join(out, "nmt.json"))
    t = Tokenizer.from_file(os.path.join(out, "nmt.json"))
    rows = []
    for i, a in enumerate(INPUTS):
        for pair in (None, INPUTS[-1 - i]):
            e = t.encode(a, pair) if pair is not None else t.encode(a)
            rows.append("\t".join(["nmt.json", "1" if pair is not None else "0", json.dumps(a), json.dumps(pair or ""),
                                   " ".join(map(str, e.ids)), " ".join(map(str, e.type_ids)),
                                   " ".join(map(str, e.special_tokens_mask)),
                                   " ".join("%d:%d" % o for o in e.offsets)]))
    with open(os.path.join(out, "nmt.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
