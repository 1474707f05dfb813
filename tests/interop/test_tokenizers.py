"""est tokenize --tokenizer_file against HuggingFace `tokenizers` (issue 47, docs/tokenizer.md §8)
on the real tokenizer.json files of ../shared/data/tokenizers/ (read from there; the test skips
when that folder is absent) over a multilingual text set this file generates itself.

The text: TEXT_LINES lines from a fixed seed, in the 20 scripts of SCRIPTS (Latin with accents,
Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Han, Hiragana/Katakana, Hangul, Georgian,
Armenian, Ethiopic, Tamil, fullwidth forms) plus emoji with ZWJ sequences and flags, combining
marks, control characters, very long words, digits, punctuation and mixed whitespace (tabs,
NBSP, ideographic space, U+2028). For each file, `est tokenize --output=json` runs once over
all lines (single texts) and once with `--pair` over text_a<TAB>text_b lines, and once with
`--max_length=24 --truncation=...` over the pairs; tokenizers' encode_batch on the same texts
(with the file's own truncation and padding, as a plain Tokenizer.from_file gives) must give the
same ids, type_ids, special_tokens_mask, attention_mask and offsets, line for line.
"""
import json
import os
import random
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")

from conftest import EST, ROOT

SHARED = os.path.join(ROOT, "..", "shared", "data", "tokenizers")
FILES = ["t5", "albert-base-v2", "gpt2", "open-llama-3b", "bert-base-multilingual-cased"]
TEXT_LINES = int(os.environ.get("EST_TOKENIZERS_LINES", "100000"))
FIELDS = ["ids", "type_ids", "special_tokens_mask", "attention_mask", "offsets"]


def _r(a, b):
    return [chr(c) for c in range(a, b + 1)]


# Letters of each script (assigned since Unicode 6 at the latest, so both sides know them).
SCRIPTS = {
    "latin": _r(0x61, 0x7A) + _r(0x41, 0x5A) + list("àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßœšžłđğışț"),
    "cyrillic": _r(0x430, 0x44F) + _r(0x410, 0x42F) + list("ёїієґў"),
    "greek": _r(0x3B1, 0x3C9) + _r(0x391, 0x3A9) + list("άέήίόύώϊϋΐ"),
    "arabic": _r(0x621, 0x64A) + list("\u064b\u064e\u0650\u0651٠١٢٣"),
    "hebrew": _r(0x5D0, 0x5EA) + list("\u05b0\u05b4\u05b7\u05bc"),
    "devanagari": _r(0x905, 0x939) + _r(0x93E, 0x94D) + list("\u0902\u0901ं।"),
    "thai": _r(0xE01, 0xE2E) + _r(0xE30, 0xE3A) + _r(0xE40, 0xE4E),
    "han": _r(0x4E00, 0x4E00 + 400) + list("東京北京中国日本人大学的是了"),
    "kana": _r(0x3041, 0x3093) + _r(0x30A1, 0x30F6) + list("ー"),
    "hangul": _r(0xAC00, 0xAC00 + 600) + _r(0x1100, 0x1112) + _r(0x1161, 0x1175),
    "georgian": _r(0x10D0, 0x10F0),
    "armenian": _r(0x561, 0x586) + _r(0x531, 0x556),
    "ethiopic": _r(0x1200, 0x1248) + _r(0x1250, 0x1256),
    "tamil": _r(0xB85, 0xB94) + _r(0xB95, 0xBB9) + _r(0xBBE, 0xBCD),
    "fullwidth": _r(0xFF21, 0xFF3A) + _r(0xFF41, 0xFF5A) + _r(0xFF10, 0xFF19) + list("ﬁﬂ①②½™㎏㍿"),
}
EMOJI = ["😀", "👍", "👍🏽", "❤️", "👨\u200d👩\u200d👧\u200d👦", "👩\u200d💻", "🏳️\u200d🌈", "🇫🇷", "🇯🇵",
         "🧑🏿\u200d🦱", "✓", "∑", "€", "©", "🤖"]
COMBINING = ["\u0301", "\u0300", "\u0308", "\u0327", "\u0303", "\u20dd", "\u0336", "\u035c"]
CONTROLS = ["\x01", "\x07", "\x0b", "\x0c", "\x1f", "\x7f", "\x85", "\u200b", "\u200c", "\u200d",
            "\u2060", "\ufeff", "\u00ad", "\ue000", "\ufffd"]
SPACES = [" ", " ", " ", " ", "  ", "\t", "\u00a0", "\u3000", "\u2009", "\u2028", "\r", " \t "]
PUNCT = list(".,;:!?\"'()[]{}-—–…«»„“”‘’/\\@#$%^&*+=<>|~`。、！？，：「」،؟")
SPECIALS = ["</s>", "<s>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "<pad>", "<extra_id_0>", "<|endoftext|>"]


def _word(rng, script):
    letters = SCRIPTS[script]
    n = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 10, 12])
    if rng.random() < 0.004:
        n = rng.randint(90, 260)  # very long words (WordPiece's max_input_chars_per_word is 100)
    w = "".join(rng.choice(letters) for _ in range(n))
    if rng.random() < 0.08:
        i = rng.randrange(len(w) + 1)
        w = w[:i] + rng.choice(COMBINING) + w[i:]
    return w


def _piece(rng, scripts):
    x = rng.random()
    if x < 0.72:
        return _word(rng, rng.choice(scripts))
    if x < 0.80:
        return rng.choice(PUNCT) * rng.choice([1, 1, 1, 2, 3])
    if x < 0.87:
        return str(rng.randint(0, 10 ** rng.randint(1, 9)))
    if x < 0.93:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    if x < 0.97:
        return rng.choice(CONTROLS)
    return rng.choice(SPECIALS)


def text_lines(n, seed=47):
    """n lines, each mostly in one script (its first one) with pieces of up to two others."""
    rng = random.Random(seed)
    names = sorted(SCRIPTS)
    lines = []
    for i in range(n):
        scripts = [names[i % len(names)]] * 4 + rng.sample(names, rng.randint(0, 2))
        k = rng.choice([0, 1, 2, 3, 5, 8, 12, 20, 40])
        parts = []
        for _ in range(k):
            parts.append(_piece(rng, scripts))
            parts.append(rng.choice(SPACES) if rng.random() < 0.85 else "")
        s = "".join(parts)
        if rng.random() < 0.1:
            s = rng.choice(SPACES) + s
        lines.append(s)
    return lines


def _est(path, lines, *flags):
    data = "".join(l + "\n" for l in lines).encode("utf-8")
    p = subprocess.run([EST, "tokenize", "--tokenizer_file=" + path, "--output=json", *flags],
                       input=data, capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    out = p.stdout.decode("utf-8").split("\n")[:-1]
    assert len(out) == len(lines)
    return [json.loads(o) for o in out]


def _encode(tok, x):
    return tok.encode(*x) if isinstance(x, tuple) else tok.encode(x)


def _hf(tok, inputs):
    """tokenizers' encodings of the inputs it takes, and the inputs it refuses (a truncation
    it cannot do: OnlySecond without a second text, a text too short to cut, or one cut to no more tokens than the stride, where it panics)."""
    try:
        if not tok.padding or tok.padding.get("length") is not None:  # batch padding would differ
            return inputs, tok.encode_batch(inputs), []
    except BaseException as e:  # a PanicException too (a stride over the cut length)
        if isinstance(e, KeyboardInterrupt):
            raise
    ok, enc, refused = [], [], []
    for x in inputs:
        try:
            enc.append(_encode(tok, x))
            ok.append(x)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            refused.append(x)
    return ok, enc, refused


def _check(name, what, path, tok, inputs, *flags):
    """est over the inputs tokenizers takes gives its encodings; est refuses (a few of) the others."""
    ok, want, refused = _hf(tok, inputs)
    as_line = (lambda x: x[0] + "\t" + x[1]) if flags and flags[0] == "--pair" else (lambda x: x)
    _compare(name, what, ok, _est(path, [as_line(x) for x in ok], *flags), want)
    for x in refused[:3]:
        p = subprocess.run([EST, "tokenize", "--tokenizer_file=" + path, "--output=json", *flags],
                           input=(as_line(x) + "\n").encode("utf-8"), capture_output=True)
        assert p.returncode == 1 and b"Truncation error" in p.stderr, (name, what, x, p.stderr)
    return len(ok), len(refused)


def _compare(name, what, inputs, got, want):
    bad = []
    for i, (g, w) in enumerate(zip(got, want)):
        ref = {"ids": w.ids, "type_ids": w.type_ids, "special_tokens_mask": w.special_tokens_mask,
               "attention_mask": w.attention_mask, "offsets": [list(o) for o in w.offsets]}
        diff = [f for f in FIELDS if g[f] != ref[f]]
        over = [{f: x[f] for f in FIELDS} for x in g.get("overflowing", [])]
        want_over = [{"ids": o.ids, "type_ids": o.type_ids, "special_tokens_mask": o.special_tokens_mask,
                      "attention_mask": o.attention_mask, "offsets": [list(x) for x in o.offsets]}
                     for o in w.overflowing]
        if not diff and over != want_over:
            k = next((j for j in range(min(len(over), len(want_over))) if over[j] != want_over[j]),
                     min(len(over), len(want_over)))
            pytest.fail(f"{name} {what}: line {i + 1} {inputs[i]!r}: overflowing window {k} of "
                        f"{len(over)} (want {len(want_over)}) differs")
        if diff:
            bad.append((i, diff, inputs[i], g, ref, w.tokens))
    if bad:
        i, diff, text, g, ref, toks = bad[0]
        k = next(j for j in range(max(len(g[diff[0]]), len(ref[diff[0]])))
                 if g[diff[0]][j:j + 1] != ref[diff[0]][j:j + 1])
        w = slice(max(0, k - 3), k + 12)  # a window at the first difference
        pytest.fail(f"{name} {what}: {len(bad)} of {len(inputs)} lines differ; first, line {i + 1} {text!r}, "
                    f"in {diff} from token {k}:\n"
                    f" est {json.dumps({f: g[f][w] for f in ['tokens'] + diff}, ensure_ascii=False)}\n"
                    f" hf  {json.dumps(dict({'tokens': toks[w]}, **{f: ref[f][w] for f in diff}), ensure_ascii=False)}")


@pytest.fixture(scope="module")
def lines():
    return text_lines(TEXT_LINES)


@pytest.mark.parametrize("name", FILES)
def test_tokenizers_real_files(name, lines):
    path = os.path.join(SHARED, name + ".tokenizer.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} is absent")
    tok = tokenizers.Tokenizer.from_file(path)
    _check(name, "single", path, tok, lines)
    # Pairs: text_a has no tab (est splits at the first one); a quarter of the set.
    pairs = [(lines[i].replace("\t", " "), lines[-1 - i]) for i in range(0, len(lines), 4)]
    _check(name, "pair", path, tok, pairs, "--pair")
    left = tok.truncation and tok.truncation.get("direction") == "left"
    for strategy in ("longest_first", "only_first", "only_second"):
        tok.enable_truncation(24, strategy=strategy, direction="left" if left else "right")
        _check(name, "pair, --max_length=24 --truncation=" + strategy, path, tok, pairs[: len(pairs) // 8],
               "--pair", "--max_length=24", "--truncation=" + strategy)
    # overflowing windows (Encoding.overflowing) with a stride, single texts and pairs
    tok.enable_truncation(24, stride=5, direction="left" if left else "right")
    _check(name, "single, --max_length=24 --stride=5", path, tok, lines[: len(lines) // 8], "--max_length=24",
           "--stride=5")
    _check(name, "pair, --max_length=24 --stride=5", path, tok, pairs[: len(pairs) // 16], "--pair",
           "--max_length=24", "--stride=5")


@pytest.mark.parametrize("name", FILES)
def test_tokenizers_decode(name, lines):
    """`est tokenize --decode` gives Tokenizer.decode of the ids tokenizers encodes every 20th
    line to, with and without skip_special_tokens, and of ids in random order (byte tokens cut
    from their runs, suffixes and prefixes out of place, ids past the vocabulary)."""
    path = os.path.join(SHARED, name + ".tokenizer.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} is absent")
    tok = tokenizers.Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    rng = random.Random(470)
    seqs = [e.ids for e in tok.encode_batch(lines[::20])]
    size = tok.get_vocab_size(with_added_tokens=True)
    seqs += [[rng.randrange(size + 3) for _ in range(rng.randint(0, 30))] for _ in range(len(seqs))]
    data = "".join(" ".join(map(str, s)) + "\n" for s in seqs).encode()
    for skip in (False, True):
        p = subprocess.run([EST, "tokenize", "--tokenizer_file=" + path, "--decode", "--output=json",
                            "--skip_special_tokens=" + ("true" if skip else "false")], input=data, capture_output=True)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        got = [json.loads(l) for l in p.stdout.decode("utf-8").split("\n")[:-1]]
        want = tok.decode_batch(seqs, skip_special_tokens=skip)
        assert len(got) == len(want)
        bad = [i for i in range(len(want)) if got[i] != want[i]]
        assert not bad, (f"{name} decode (skip_special_tokens={skip}): {len(bad)} of {len(want)} differ; first "
                         f"ids {seqs[bad[0]]}:\n est {got[bad[0]]!r}\n hf  {want[bad[0]]!r}")
