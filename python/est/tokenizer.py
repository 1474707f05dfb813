"""est.Tokenizer: HuggingFace `tokenizers`' Tokenizer and Encoding, on est's tokenizer.json
pipeline (docs/tokenizer.md §8)."""
import ctypes
import json
import os
import tempfile

import numpy as np

from . import _lib


class Encoding:
    """tokenizers.Encoding's fields: ids, type_ids, tokens, offsets (character offsets in its
    text, or in the pair's text for the pair's tokens; (0, 0) for special and pad tokens),
    attention_mask and special_tokens_mask."""
    __slots__ = ("ids", "type_ids", "tokens", "offsets", "attention_mask", "special_tokens_mask")

    def __init__(self, ids, type_ids, tokens, offsets, attention_mask, special_tokens_mask):
        self.ids, self.type_ids, self.tokens, self.offsets = ids, type_ids, tokens, offsets
        self.attention_mask, self.special_tokens_mask = attention_mask, special_tokens_mask

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return (f"Encoding(num_tokens={len(self.ids)}, attributes=[ids, type_ids, tokens, offsets, "
                f"attention_mask, special_tokens_mask])")


def _wordpiece_json(vocab_path, lowercase):
    """The tokenizer.json tokenizers' BertWordPieceTokenizer(vocab.txt) is: BertNormalizer,
    BertPreTokenizer, WordPiece (##, [UNK], 100 characters a word), [CLS] A [SEP] (B [SEP]), the
    special tokens the vocab has as added tokens."""
    vocab = {}
    with open(vocab_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip()] = i
    for tok in ("[UNK]", "[CLS]", "[SEP]"):
        if tok not in vocab:
            raise _lib.InvalidArgumentError(f"{vocab_path}: no {tok} in the vocabulary (a BERT vocab.txt has it)")
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in vocab]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": sorted(added, key=lambda a: a["id"]),
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]],
                           "cls": ["[CLS]", vocab["[CLS]"]]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


class Tokenizer:
    """tokenizers.Tokenizer's encode / encode_batch / decode over est's pipeline.

        tok = est.Tokenizer.from_file("tokenizer.json")
        enc = tok.encode("Hello, world!", pair=None)
        enc.ids, enc.tokens, enc.offsets

    encode_batch spreads the inputs over `threads` threads (one est tokenizer each) with the
    GIL released."""

    def __init__(self, handle, path):
        self._h = handle
        self._tmp = None
        self.path = path

    @classmethod
    def from_file(cls, path, lowercase=True):
        """A tokenizer.json, or a BERT vocab.txt (as tokenizers' BertWordPieceTokenizer(path,
        lowercase=lowercase) builds it; `lowercase` applies to a vocab.txt only)."""
        p = _lib.fspath(path)
        if not os.path.isfile(p):
            raise _lib.NotFoundError(f"{os.fsdecode(p)}: no such file (a tokenizer.json or a vocab.txt)")
        with open(p, "rb") as f:
            head = f.read(64).lstrip()
        tmp = None
        try:
            if not head.startswith(b"{"):
                # kept while the tokenizer lives: each thread of encode_batch reads it once
                fd, tmp = tempfile.mkstemp(suffix=".tokenizer.json")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(_wordpiece_json(os.fsdecode(p), bool(lowercase)), f)
            h = ctypes.c_void_p()
            _lib.check(_lib.est_capi_tokenizer_open(ctypes.byref(h), tmp.encode() if tmp else p))
        except BaseException:
            if tmp:
                os.unlink(tmp)
            raise
        t = cls(h, os.fsdecode(p))
        t._tmp = tmp
        return t

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.est_capi_tokenizer_free(h)
        tmp, self._tmp = getattr(self, "_tmp", None), None
        if tmp:
            os.unlink(tmp)

    def _handle(self):
        if not self._h:
            raise ValueError("est.Tokenizer: used after close()")
        return self._h

    def close(self):
        self.__del__()

    def encode(self, sequence, pair=None, add_special_tokens=True):
        """One Encoding of `sequence` (and `pair`), as tokenizers' Tokenizer.encode."""
        return self._run([(sequence, pair)], add_special_tokens, 1)[0]

    def encode_batch(self, inputs, add_special_tokens=True, threads=None):
        """A list of Encodings: each input a str or a (str, str) pair, as tokenizers'
        Tokenizer.encode_batch; the file's BatchLongest padding pads to the batch's longest."""
        items = []
        for i, x in enumerate(inputs):
            if isinstance(x, str):
                items.append((x, None))
            elif isinstance(x, (tuple, list)) and len(x) == 2:
                items.append((x[0], x[1]))
            else:
                raise TypeError(f"inputs[{i}]: expected a str or a (str, str) pair, got {type(x).__name__}")
        return self._run(items, add_special_tokens, _lib.threads_arg(threads))

    def _run(self, items, add_special_tokens, threads):
        texts, lens, keep = _lib.texts_arg([a for a, _ in items], "inputs")
        pairs = [b for _, b in items]
        has_pair = any(b is not None for b in pairs)
        pptr = plen = None
        if has_pair:
            enc = []
            for i, b in enumerate(pairs):
                if b is not None and not isinstance(b, str):
                    raise TypeError(f"inputs[{i}]: the pair must be a str, got {type(b).__name__}")
                enc.append(None if b is None else b.encode("utf-8"))
            pptr = (ctypes.c_char_p * len(enc))(*enc)
            plen = (ctypes.c_size_t * len(enc))(*[0 if b is None else len(b) for b in enc])
        out = ctypes.POINTER(_lib.Encodings)()
        _lib.check(_lib.est_capi_tokenizer_encode_batch(self._handle(), len(items), texts, lens, pptr, plen,
                                                        1 if add_special_tokens else 0, threads, ctypes.byref(out)))
        try:
            return _encodings(out.contents)
        finally:
            _lib.est_capi_encodings_free(out)

    def decode(self, ids, skip_special_tokens=True):
        """tokenizers' Tokenizer.decode, through the file's decoder."""
        arr = np.ascontiguousarray(ids, dtype=np.int32)
        text, size = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(_lib.est_capi_tokenizer_decode(self._handle(), arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                                  arr.size, 1 if skip_special_tokens else 0, ctypes.byref(text),
                                                  ctypes.byref(size)))
        try:
            return ctypes.string_at(text, size.value).decode("utf-8", "replace")
        finally:
            _lib.libc_free(text)

    def id_to_token(self, id):
        t = _lib.est_capi_tokenizer_id_to_token(self._handle(), int(id))
        return None if t is None else t.decode("utf-8")


def _encodings(e):
    total = e.start[e.count] if e.count else 0
    start = [e.start[i] for i in range(e.count + 1)]

    def arr(p):
        return np.ctypeslib.as_array(p, shape=(total,)).tolist() if total else []

    ids, type_ids, special, attention = arr(e.ids), arr(e.type_ids), arr(e.special_tokens_mask), arr(e.attention_mask)
    o_start, o_end = arr(e.offset_start), arr(e.offset_end)
    tokens = [e.tokens[j].decode("utf-8", "replace") for j in range(total)]
    out = []
    for i in range(e.count):
        a, b = start[i], start[i + 1]
        out.append(Encoding(ids[a:b], type_ids[a:b], tokens[a:b], list(zip(o_start[a:b], o_end[a:b])),
                            attention[a:b], special[a:b]))
    return out
