"""Goldens for tests/test_tokenizer_json.c's overflowing windows: Tokenizer.encode with truncation
and a stride, the encoding and its Encoding.overflowing, on the tokenizer.json files committed in
tests/data/tokenizers (written by tokenizers_golden.py and tokenizer_programs_golden.py).

    /tmp/tokvenv/bin/python tests/reference/tokenizers_overflow_golden.py tests/data/tokenizers

(a venv with tokenizers==0.22.1.) overflow.tsv: `file<TAB>max_length<TAB>stride<TAB>strategy<TAB>
direction<TAB>text_a<TAB>text_b<TAB>result` (texts JSON, text_b null for a single text; result
"error" where tokenizers refuses, else a JSON list of [ids, type_ids, special_tokens_mask,
attention_mask, offsets] for the encoding and then each overflowing one, in order).
"""
import json
import os
import sys

from tokenizers import Tokenizer

FILES = ["unigram.json", "bpe.json", "wordlevel.json", "wordpiece.json", "suffix.json", "fallback.json",
         "roberta_tiny.json", "xlmr_tiny.json"]

TEXTS = [
    ("The quick brown fox jumps over the lazy dog, naïve café 123.", None),
    ("Le cœur a ses raisons.", "Der Fluß; Öl und Äpfel."),
    ("東京は日本の首都です。北京是中国的首都。", "short"),
    ("a b", "the world is a world and the world is the world, again and again"),
    ("the world the world the world", "a b c d e f"),
    ("", "nothing first"),
    ("emoji 👨‍👩‍👧 🇫🇷 done and more words here to cut", None),
]

SETTINGS = [  # max_length, stride, strategy, direction
    (16, 0, "longest_first", "right"),
    (16, 4, "longest_first", "right"),
    (14, 3, "longest_first", "left"),
    (12, 4, "only_first", "right"),
    (12, 1, "only_second", "right"),
    (10, 2, "only_second", "left"),
]


def enc_json(e):
    return [e.ids, e.type_ids, e.special_tokens_mask, e.attention_mask, [list(o) for o in e.offsets]]


def main(out):
    rows = []
    for name in FILES:
        tok = Tokenizer.from_file(os.path.join(out, name))
        for max_length, stride, strategy, direction in SETTINGS:
            tok.enable_truncation(max_length, stride=stride, strategy=strategy, direction=direction)
            for a, b in TEXTS:
                try:
                    e = tok.encode(a, b)
                    result = json.dumps([enc_json(e)] + [enc_json(o) for o in e.overflowing], ensure_ascii=False)
                except BaseException:  # a Rust panic (stride assert) is a PanicException, not an Exception
                    result = "error"
                rows.append("\t".join([name, str(max_length), str(stride), strategy, direction,
                                       json.dumps(a, ensure_ascii=False), json.dumps(b, ensure_ascii=False), result]))
    with open(os.path.join(out, "overflow.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
