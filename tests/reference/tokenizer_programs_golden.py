"""Goldens for tests/test_tokenizer_programs.c: est's programs (run_classifier's features,
extract_features, embed / serve / predict's featurizer) on a HuggingFace RoBERTa / XLM-R
directory whose tokenizer is a tokenizer.json, against transformers' own tokenizer there.

    .venv-interop/bin/python tests/reference/tokenizer_programs_golden.py tests/data/tokenizers

(make interop's venv: tokenizers 0.19.1, transformers 4.44.2.) The encoder fixtures of
tests/data/encoders have a 40-token vocab, so the two tokenizers are built here by hand, small:

- roberta_tiny.json: byte-level BPE (ByteLevel pre-tokenizer with add_prefix_space false, as
  roberta-base; RobertaProcessing; ByteLevel decoder), <unk> for the bytes it lacks;
- xlmr_tiny.json: Unigram (NFKC, Metaspace prepend "always"; the template transformers'
  XLMRobertaConverter writes: <s> $A </s> and <s> $A </s> </s> $B </s>), <unk> id 3.

programs.tsv: `file<TAB>max_length<TAB>text_a<TAB>text_b<TAB>ids<TAB>type_ids` (texts
JSON-escaped, text_b "" for a single text), what AutoTokenizer.from_pretrained(dir) with the
file as the directory's tokenizer.json gives for tokenizer(a[, b], truncation=True,
max_length=max_length).
"""
import json
import os
import shutil
import sys
import tempfile

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ENCODERS = os.path.join(HERE, "..", "data", "encoders")

SPECIAL = ["<s>", "<pad>", "</s>", "<unk>"]


def roberta_tiny():
    byte = pre_tokenizers.ByteLevel.alphabet()
    letters = [c for c in "abdefhilnorstuwTĠ.,!" if c in byte or c == "Ġ"]
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("o", "r"), ("Ġ", "a"), ("e", "s"), ("Ġ", "w"),
              ("Ġw", "or"), ("Ġwor", "d"), ("l", "l"), ("s", "t")]
    vocab = {t: i for i, t in enumerate(SPECIAL)}
    for t in letters + ["".join(m) for m in merges]:
        vocab.setdefault(t, len(vocab))
    assert len(vocab) <= 40, len(vocab)
    t = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>"))
    t.add_special_tokens(SPECIAL)
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                    add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    return t


def xlmr_tiny():
    pieces = [(s, 0.0) for s in SPECIAL]
    for p, score in [("\u2581", -2.0), ("\u2581the", -3.0), ("\u2581a", -3.5), ("\u2581w", -4.0), ("or", -4.0),
                     ("ld", -4.5), ("\u2581world", -5.0), ("s", -3.0), ("e", -3.2), ("t", -3.3), ("h", -3.4),
                     ("i", -3.6), ("n", -3.7), ("o", -3.8), ("r", -3.9), ("l", -4.1), ("d", -4.2), ("a", -4.3),
                     ("w", -4.4), ("\u2581東", -6.0), ("京", -6.0), (".", -3.0), (",", -3.1), ("!", -5.0),
                     ("\u2581in", -4.6), ("\u2581is", -4.7), ("ing", -5.5), ("\u2581s", -4.8)]:
        pieces.append((p, score))
    assert len(pieces) <= 40, len(pieces)
    t = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    t.add_special_tokens(SPECIAL)
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    return t


CASES = [
    ("the world", None),
    ("The world is a world.", None),
    ("Hello, world!", "the world"),
    ("the world the world the world the world", "a world"),
    ("a", "the world is the world, the world"),
    ("東京 in the world", None),
    ("  spaces\tand\nlines  ", "ünïcödé ﬁ"),
    ("", "world"),
    ("world", ""),
]


def main(out):
    files = {"roberta_tiny.json": (roberta_tiny(), "roberta_cls"), "xlmr_tiny.json": (xlmr_tiny(), "xlm_roberta_cls")}
    rows = []
    for name, (tok, enc) in files.items():
        path = os.path.join(out, name)
        tok.save(path)
        with tempfile.TemporaryDirectory() as d:  # the HF directory est reads: config + weights + tokenizer.json
            shutil.copy(os.path.join(ENCODERS, enc, "config.json"), d)
            shutil.copy(path, os.path.join(d, "tokenizer.json"))
            hf = AutoTokenizer.from_pretrained(d)
            assert hf.is_fast, name
            for max_length in (10, 6):
                for a, b in CASES:
                    e = hf(a, b or None, truncation=True, max_length=max_length)
                    rows.append("\t".join([name, str(max_length), json.dumps(a, ensure_ascii=False),
                                           json.dumps(b or "", ensure_ascii=False),
                                           " ".join(map(str, e["input_ids"])),
                                           " ".join(map(str, e.get("token_type_ids", [0] * len(e["input_ids"]))))]))
    with open(os.path.join(out, "programs.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
