"""tokenizer.json goldens for test_hf_tokenizer: HuggingFace `tokenizers`' ids on the inputs
of tests/data/tokenizer_golden.tsv (the FullTokenizer tests' inputs).

    .venv-interop/bin/python tests/reference/hf_tokenizer_ref.py tests/data/vocab_uncased.txt \
        tests/data/tokenizer_golden.tsv tests/data/hf

(tokenizers 0.19.1.) Writes tests/data/hf/tokenizer_lower.json (BertNormalizer lowercase,
strip_accents null) and tokenizer_strip.json (lowercase false, strip_accents true), both with
the uncased vocab, and tests/data/hf/tokenizer_json_golden.tsv: `<input hex>\t<file>\t<ids>`.
Inputs are bytes; as est does, invalid UTF-8 is dropped (decode errors="ignore") before
`tokenizers` sees the text. Ids are encode(text, add_special_tokens=False).ids.
"""
import os
import sys

from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer


def make(vocab_path, lowercase, strip_accents):
    with open(vocab_path, encoding="utf-8") as f:
        vocab = {}
        for i, line in enumerate(f):
            vocab[line.rstrip("\n").strip()] = i
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=strip_accents,
                                    lowercase=lowercase)
    tok.pre_tokenizer = BertPreTokenizer()
    return tok


def main():
    vocab_path, golden_in, out_dir = sys.argv[1:4]
    inputs = []
    with open(golden_in, encoding="ascii") as f:
        for line in f:
            h = line.split("\t")[0]
            if h not in inputs:
                inputs.append(h)
    files = {"tokenizer_lower.json": make(vocab_path, True, None),
             "tokenizer_strip.json": make(vocab_path, False, True)}
    with open(os.path.join(out_dir, "tokenizer_json_golden.tsv"), "w", encoding="ascii") as out:
        for name, tok in files.items():
            tok.save(os.path.join(out_dir, name))
            tok = Tokenizer.from_file(os.path.join(out_dir, name))  # what est reads
            for h in inputs:
                text = bytes.fromhex(h).decode("utf-8", errors="ignore")
                ids = tok.encode(text, add_special_tokens=False).ids
                out.write("%s\t%s\t%s\n" % (h, name, " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
