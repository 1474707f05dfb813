"""Goldens for tests/test_tokenizer_json.c: tokenizer.json files that HuggingFace `tokenizers`
writes itself (trained here on a small multilingual text), and their encodings.

    /tmp/tokvenv/bin/python tests/reference/tokenizers_golden.py tests/data/tokenizers

(a venv with tokenizers==0.22.1.) Writes unigram.json (Unigram, NFKC + Metaspace, T5-like
template, Metaspace decoder), bpe.json (byte-level BPE, ByteLevel pre-tokenizer / post-processor /
decoder, RoBERTa-like template), wordlevel.json (WordLevel, Lowercase + Whitespace + Digits,
BERT-like template, LongestFirst truncation to 12, WordPiece decoder), wordpiece.json (WordPiece,
BertNormalizer + BertPreTokenizer, WordPiece decoder without cleanup),
suffix.json (BPE with end_of_word_suffix, BPEDecoder), fallback.json (a Llama-like BPE built
here: byte_fallback, Prepend + Replace normalizer, decoder Sequence[Replace, ByteFallback, Fuse,
Strip]), golden.tsv: `file<TAB>pair(0/1)<TAB>text_a<TAB>text_b<TAB>
ids<TAB>type_ids<TAB>special_tokens_mask<TAB>offsets` (texts JSON-escaped, lists as spaces,
offsets as s:e), encode(text[, pair]) with special tokens and the file's own truncation; and
decode.tsv: `file<TAB>skip_special_tokens(0/1)<TAB>ids<TAB>text` (text JSON-escaped),
Tokenizer.decode of each single encoding and of random ids.
"""
import json
import os
import sys

import random

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

TEXT = [
    "The quick brown fox jumps over the lazy dog, naïve café 123.",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Der Fluß überquert die Straße; Öl und Äpfel.",
    "東京は日本の首都です。北京是中国的首都。",
    "서울은 한국의 수도입니다.",
    "Москва — столица России.",
    "القاهرة عاصمة مصر.",
    "ירושלים היא עיר.",
    "नई दिल्ली भारत की राजधानी है।",
    "กรุงเทพมหานครเป็นเมืองหลวง",
    "Ｆｕｌｌｗｉｄｔｈ ﬁ ① ½ ™ e\u0301",
    "emoji 👨‍👩‍👧 🇫🇷 done",
]
INPUTS = TEXT + ["  spaces\tand tabs  ", "", "unseen ✓ ∑ words", "<s> special </s> [CLS] x",
                 # unassigned (kept by BertNormalizer), private use (dropped), a Cf of Unicode 14 (kept)
                 "a\u0b97b c\ue000d e\u0890f don't ?"]


def train(tok, trainer):
    tok.train_from_iterator(TEXT * 20, trainer)
    return tok


def main():
    out = sys.argv[1]
    toks = {}
    u = Tokenizer(models.Unigram())
    u.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" +", " ")])
    u.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    train(u, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>"))
    u.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B:1 </s>:1",
                                                     special_tokens=[("</s>", u.token_to_id("</s>"))])
    u.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    toks["unigram.json"] = u
    b = Tokenizer(models.BPE())
    b.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    train(b, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    b.post_processor = processors.RobertaProcessing(("</s>", b.token_to_id("</s>")), ("<s>", b.token_to_id("<s>")),
                                                    trim_offsets=True, add_prefix_space=True)
    b.decoder = decoders.ByteLevel()
    toks["bpe.json"] = b
    w = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    w.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    w.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)])
    train(w, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    w.post_processor = processors.BertProcessing(("[SEP]", w.token_to_id("[SEP]")), ("[CLS]", w.token_to_id("[CLS]")))
    w.enable_truncation(12)
    w.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    toks["wordlevel.json"] = w
    p = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    p.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=False)
    p.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    train(p, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    p.post_processor = processors.BertProcessing(("[SEP]", p.token_to_id("[SEP]")), ("[CLS]", p.token_to_id("[CLS]")))
    p.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    toks["wordpiece.json"] = p
    x = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    x.pre_tokenizer = pre_tokenizers.Whitespace()
    train(x, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"], end_of_word_suffix="</w>"))
    x.decoder = decoders.BPEDecoder(suffix="</w>")
    toks["suffix.json"] = x
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(256):
        vocab["<0x%02X>" % i] = 3 + i
    pieces = ["\u2581", "e", "t", "h", "a", "o", "n", "\u2581t", "he", "\u2581the", "\u2581a", "an", "\u2581an"]
    for q in pieces:
        vocab[q] = len(vocab)
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("\u2581", "a"), ("a", "n"), ("\u2581", "an")]
    f = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    f.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    f.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                     special_tokens=[("<s>", 1)])
    f.add_special_tokens(["<s>", "</s>"])
    f.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(content=" ", left=1, right=0)])
    toks["fallback.json"] = f
    rows, drows = [], []
    rng = random.Random(47)
    for name, t in toks.items():
        t.save(os.path.join(out, name))
        t = Tokenizer.from_file(os.path.join(out, name))
        for i, a in enumerate(INPUTS):
            for pair in (None, INPUTS[-1 - i]):
                e = t.encode(a, pair) if pair is not None else t.encode(a)
                rows.append("\t".join([name, "1" if pair is not None else "0", json.dumps(a), json.dumps(pair or ""),
                                       " ".join(map(str, e.ids)), " ".join(map(str, e.type_ids)),
                                       " ".join(map(str, e.special_tokens_mask)),
                                       " ".join("%d:%d" % o for o in e.offsets)]))
        seqs = [t.encode(a).ids for a in INPUTS]
        size = t.get_vocab_size(with_added_tokens=True)
        seqs += [[rng.randrange(size + 2) for _ in range(rng.randint(0, 12))] for _ in range(8)]
        if name == "fallback.json":  # byte runs: valid UTF-8, cut inside a char, a NUL
            seqs += [[3 + 0xE6, 3 + 0x9D, 3 + 0xB1, 3 + 0x41], [3 + 0xE6, 3 + 0x9D, 3 + 0x41, 3 + 0xB1], [3, 262]]
        for ids in seqs:
            for skip in (0, 1):
                drows.append("\t".join([name, str(skip), " ".join(map(str, ids)),
                                        json.dumps(t.decode(ids, skip_special_tokens=bool(skip)))]))
    with open(os.path.join(out, "golden.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    with open(os.path.join(out, "decode.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(drows) + "\n")


if __name__ == "__main__":
    main()
