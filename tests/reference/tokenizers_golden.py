"""Goldens for tests/test_tokenizer_json.c: tokenizer.json files that HuggingFace `tokenizers`
writes itself (trained here on a small multilingual text), and their encodings.

    /tmp/tokvenv/bin/python tests/reference/tokenizers_golden.py tests/data/tokenizers

(a venv with tokenizers==0.22.1.) Writes unigram.json (Unigram, NFKC + Metaspace, T5-like
template), bpe.json (byte-level BPE, ByteLevel pre-tokenizer / post-processor, RoBERTa-like
template), wordlevel.json (WordLevel, Lowercase + Whitespace + Digits, BERT-like template,
LongestFirst truncation to 12) and golden.tsv: `file<TAB>pair(0/1)<TAB>text_a<TAB>text_b<TAB>
ids<TAB>type_ids<TAB>special_tokens_mask<TAB>offsets` (texts JSON-escaped, lists as spaces,
offsets as s:e), encode(text[, pair]) with special tokens and the file's own truncation.
"""
import json
import os
import sys

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

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
INPUTS = TEXT + ["  spaces\tand tabs  ", "", "unseen ✓ ∑ words", "<s> special </s> [CLS] x"]


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
    toks["unigram.json"] = u
    b = Tokenizer(models.BPE())
    b.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    train(b, trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    b.post_processor = processors.RobertaProcessing(("</s>", b.token_to_id("</s>")), ("<s>", b.token_to_id("<s>")),
                                                    trim_offsets=True, add_prefix_space=True)
    toks["bpe.json"] = b
    w = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    w.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    w.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)])
    train(w, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    w.post_processor = processors.BertProcessing(("[SEP]", w.token_to_id("[SEP]")), ("[CLS]", w.token_to_id("[CLS]")))
    w.enable_truncation(12)
    toks["wordlevel.json"] = w
    rows = []
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
    with open(os.path.join(out, "golden.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
