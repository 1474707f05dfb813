#!/usr/bin/env python3
"""Reference outputs for est's tokenizer tests (developer tool; `make test` does not run it).

A plain transcription of google-research/bert tokenization.py's behaviour as described in
docs/tokenizer.md sections 1-3 (BasicTokenizer + WordpieceTokenizer), run under
CPython's own str.lower(), str.split(), str.strip() and unicodedata, which is what the
reference relies on. It writes tests/data/tokenizer_golden.tsv: one line per case,
"<input bytes in hex>\t<do_lower_case 0|1>\t<space-separated ids>".

Inputs: fixed tricky strings, every line of a few GLUE files, and random strings drawn from
a pool of code points chosen to hit every rule (controls, format chars, Zs/Zl/Zp, CJK,
Hangul, Greek sigma, U+0130, combining marks, punctuation of all P* kinds, symbols, emoji,
invalid UTF-8). Code points assigned after Unicode 14.0 are avoided: utf8proc 2.8 (Unicode
15.0) would legitimately differ on them.

usage: python3 tests/reference/bert_tokenizer_ref.py tests/data/vocab_uncased.txt \
           tests/data/tokenizer_golden.tsv [glue_file ...]
"""
import random
import sys
import unicodedata


def load_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8", newline="\n") as f:
        index = 0
        for line in f:
            vocab[line.strip()] = index
            index += 1
    return vocab


def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, lower):
    cleaned = []
    for c in text:
        cp = ord(c)
        if cp == 0 or cp == 0xFFFD or is_control(c):
            continue
        cleaned.append(" " if is_whitespace(c) else c)
    spaced = []
    for c in cleaned:
        if is_cjk(ord(c)):
            spaced.extend((" ", c, " "))
        else:
            spaced.append(c)
    out = []
    for tok in "".join(spaced).strip().split():
        if lower:
            tok = tok.lower()
            tok = "".join(c for c in unicodedata.normalize("NFD", tok)
                          if unicodedata.category(c) != "Mn")
        pieces, cur = [], []
        for c in tok:
            if is_punctuation(c):
                if cur:
                    pieces.append("".join(cur))
                    cur = []
                pieces.append(c)
            else:
                cur.append(c)
        if cur:
            pieces.append("".join(cur))
        out.extend(pieces)
    return " ".join(out).strip().split()


def wordpiece(vocab, token):
    if len(token) > 200:
        return ["[UNK]"]
    start, sub = 0, []
    while start < len(token):
        end, cur = len(token), None
        while start < end:
            piece = token[start:end]
            if start > 0:
                piece = "##" + piece
            if piece in vocab:
                cur = piece
                break
            end -= 1
        if cur is None:
            return ["[UNK]"]
        sub.append(cur)
        start = end
    return sub


def encode(vocab, raw, lower):
    text = raw.decode("utf-8", "ignore")
    ids = []
    for tok in basic_tokenize(text, lower):
        ids.extend(vocab[p] for p in wordpiece(vocab, tok))
    return ids


def assigned_in_14(c):
    return unicodedata.category(c) != "Cn"


def pool():
    cps = list(range(0x20, 0x7F)) * 3
    cps += [0x00, 0x05, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1F, 0x7F, 0x85, 0xA0, 0xAD, 0xFFFD]
    cps += list(range(0xA1, 0x250))           # Latin-1, Latin Extended
    cps += list(range(0x300, 0x370))          # combining diacritics (Mn)
    cps += list(range(0x370, 0x400))          # Greek incl. sigma forms
    cps += [0x3A3] * 40 + [0x130] * 10 + [0x131, 0x1E9E, 0x2126, 0x212A, 0x212B]
    cps += list(range(0x400, 0x530))          # Cyrillic
    cps += list(range(0x591, 0x5F5))          # Hebrew marks + letters
    cps += list(range(0x600, 0x6FF))          # Arabic (Cf 0x600.., Mn, Po)
    cps += list(range(0x900, 0x980))          # Devanagari (Mn, Mc)
    cps += list(range(0x1100, 0x1200))        # Hangul Jamo
    cps += list(range(0x1E00, 0x1F00))        # Latin Extended Additional
    cps += list(range(0x1F00, 0x2000))        # Greek Extended (long decompositions)
    cps += list(range(0x2000, 0x2070))        # general punctuation, Zs, Zl, Zp, Cf
    cps += list(range(0x20A0, 0x20C0)) + list(range(0x2100, 0x2190))  # currency, letterlike, Roman
    cps += list(range(0x24B6, 0x24EA))        # circled letters (Other_Uppercase/Lowercase)
    cps += list(range(0x3000, 0x3100))        # CJK punctuation, kana
    cps += list(range(0x4E00, 0x4E80)) + list(range(0x3400, 0x3420))
    cps += list(range(0xAC00, 0xAC40)) + list(range(0xD7A0, 0xD7A4))  # Hangul syllables
    cps += list(range(0xF900, 0xF920)) + list(range(0xFB00, 0xFB07))  # compat ideographs, ligatures
    cps += list(range(0xFE00, 0xFE10)) + [0xFEFF] + list(range(0xFF01, 0xFF60))
    cps += [0x1D165, 0x1D16D, 0x1D16E, 0x1D15E, 0x1F130, 0x1F170, 0x10400, 0x10428, 0x20000, 0x2F800]
    cps += list(range(0x1F600, 0x1F650)) + [0x1F3FB, 0x200D, 0xE000, 0xF0000]
    return [chr(c) for c in cps if 0xD800 > c or c > 0xDFFF if assigned_in_14(chr(c))]


FIXED = [
    "UNwant\u00E9d,running", "ah\u535A\u63A8zz", " \tHeLLo!how  \n Are yoU?  ", "H\u00E9llo",
    "John Johanson's,", "\u0130stanbul", "STRASSE stra\u00DFe", "a\u2028b\u2029c", "a\u00A0b\u3000c",
    "x\u200By\uFEFFz\u00ADw", "a\x00b\uFFFDc\x05d", "\u00E9\u0301", "\u0301\u0301",
    "$5.00 + 3^2 = `x` | ~y", "\u20AC10 \u00A9 \u00B0C", "\u300C\u65E5\u672C\u300D\u3067\u3059",
    "\uD55C\uAD6D\uC5B4", "\U0001F4A9poo", "don't", "\uFF21\uFF22\uFF23", "caf\u00E9\u2014\u201Cquoted\u201D",
    "\u039F\u0394\u039F\u03A3 \u03A3", "A\u03A3B A\u03A3'", "A\u03A3\u0301", "A\u0301\u03A3",
    "x" * 200, "x" * 201, "\u00E9" * 201, "unaffable tokenization \U0001F600",
]


def main():
    vocab_path, out_path = sys.argv[1], sys.argv[2]
    vocab = load_vocab(vocab_path)
    rng = random.Random(12345)
    chars = pool()
    cases = [s.encode("utf-8") for s in FIXED]
    for glue in sys.argv[3:]:
        with open(glue, "rb") as f:
            lines = f.read().split(b"\n")
        cases.extend(lines[:: max(1, len(lines) // 100)])
    for _ in range(1000):
        n = rng.randint(1, 30)
        s = "".join(rng.choice(chars) for _ in range(n))
        b = bytearray(s.encode("utf-8"))
        if rng.random() < 0.15:               # sprinkle invalid bytes / cut sequences
            for _ in range(rng.randint(1, 3)):
                b.insert(rng.randint(0, len(b)), rng.choice([0x80, 0xBF, 0xC0, 0xE4, 0xED, 0xF0, 0xF5, 0xFF]))
        cases.append(bytes(b))
    with open(out_path, "w", encoding="ascii", newline="\n") as out:
        for raw in cases:
            for lower in (0, 1):
                ids = encode(vocab, raw, lower)
                out.write("%s\t%d\t%s\n" % (raw.hex(), lower, " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
