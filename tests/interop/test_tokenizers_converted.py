"""est tokenize --tokenizer_file against HuggingFace `tokenizers` on tokenizer.json files written
here (issue 47, docs/tokenizer.md §8.4): SentencePiece models trained on the generated lines
(`sentencepiece`, Unigram and a byte-fallback BPE) and converted by transformers' own converters
(convert_slow_tokenizer: XLM-R, CamemBERT, ALBERT, T5, Llama), and models `tokenizers` trains
itself (SentencePieceUnigramTokenizer, SentencePieceBPETokenizer, ByteLevelBPETokenizer,
BertWordPieceTokenizer). The same checks as test_tokenizers.py's real files: single texts, pairs,
pairs truncated under each strategy and windows with a stride, ids / type ids / masks / offsets
line for line.
"""
import os

import pytest

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
transformers = pytest.importorskip("transformers")

from test_tokenizers import _check, text_lines  # noqa: E402

TRAIN_LINES = 20000
# Nine files x single texts, pairs, three truncations and windows: at test_tokenizers.py's
# 100,000 lines this module alone took over half an hour and 12 GB in make interop on 2 cores;
# 10,000 lines of the same generator keep every script and its rare characters
# (EST_TOKENIZERS_CONVERTED_LINES=100000 for the long run, docs/tokenizer.md §8.4).
CONVERTED_LINES = int(os.environ.get("EST_TOKENIZERS_CONVERTED_LINES", "10000"))


@pytest.fixture(scope="module")
def lines():
    return text_lines(CONVERTED_LINES)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """name -> tokenizer.json path, all written here."""
    d = tmp_path_factory.mktemp("converted")
    corpus = d / "corpus.txt"
    train = text_lines(TRAIN_LINES, seed=4747)
    corpus.write_text("".join(l.replace("\n", " ") + "\n" for l in train), encoding="utf-8")
    common = dict(input=str(corpus), vocab_size=3000, character_coverage=0.9995, num_threads=2,
                  pad_id=1, bos_id=0, eos_id=2, unk_id=3, input_sentence_size=TRAIN_LINES, shuffle_input_sentence=False,
                  minloglevel=2)
    spm.SentencePieceTrainer.train(model_prefix=str(d / "uni"), model_type="unigram", **common)
    spm.SentencePieceTrainer.train(model_prefix=str(d / "bpe"), model_type="bpe", byte_fallback=True, **common)
    out = {}

    def save(name, tok):
        path = str(d / (name + ".json"))
        tok.backend_tokenizer.save(path) if hasattr(tok, "backend_tokenizer") else tok.save(path)
        out[name] = path

    uni, bpe = str(d / "uni.model"), str(d / "bpe.model")
    save("xlmr-converted", transformers.XLMRobertaTokenizerFast(vocab_file=uni))
    save("camembert-converted", transformers.CamembertTokenizerFast(vocab_file=uni))
    save("albert-converted", transformers.AlbertTokenizerFast(vocab_file=uni))
    save("t5-converted", transformers.T5TokenizerFast(vocab_file=uni))
    save("llama-converted", transformers.LlamaTokenizerFast(vocab_file=bpe, from_slow=True, legacy=False))
    texts = [l.replace("\n", " ") for l in train]
    u = tokenizers.SentencePieceUnigramTokenizer()
    u.train_from_iterator(texts, vocab_size=3000, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                          show_progress=False)
    save("spm-unigram-trained", u)
    b = tokenizers.SentencePieceBPETokenizer()
    b.train_from_iterator(texts, vocab_size=3000, special_tokens=["<unk>"], show_progress=False)
    save("spm-bpe-trained", b)
    y = tokenizers.ByteLevelBPETokenizer(add_prefix_space=True, trim_offsets=True)
    y.train_from_iterator(texts, vocab_size=3000, special_tokens=["<s>", "</s>"], show_progress=False)
    save("bytelevel-bpe-trained", y)
    w = tokenizers.BertWordPieceTokenizer(lowercase=False)
    w.train_from_iterator(texts, vocab_size=3000, show_progress=False)
    save("wordpiece-trained", w)
    return out


NAMES = ["xlmr-converted", "camembert-converted", "albert-converted", "t5-converted", "llama-converted",
         "spm-unigram-trained", "spm-bpe-trained", "bytelevel-bpe-trained", "wordpiece-trained"]


@pytest.mark.parametrize("name", NAMES)
def test_converted_and_trained(name, files, lines):
    path = files[name]
    tok = tokenizers.Tokenizer.from_file(path)
    _check(name, "single", path, tok, lines)
    pairs = [(lines[i].replace("\t", " "), lines[-1 - i]) for i in range(0, len(lines), 4)]
    _check(name, "pair", path, tok, pairs, "--pair")
    for strategy in ("longest_first", "only_first", "only_second"):
        tok.enable_truncation(24, strategy=strategy)
        _check(name, "pair, --max_length=24 --truncation=" + strategy, path, tok, pairs[: len(pairs) // 8],
               "--pair", "--max_length=24", "--truncation=" + strategy)
    tok.enable_truncation(24, stride=5)
    _check(name, "single, --max_length=24 --stride=5", path, tok, lines[: len(lines) // 8], "--max_length=24",
           "--stride=5")
