"""Models in the shapes their Python peers have: SentenceEncoder (sentence-transformers'
SentenceTransformer.encode), Classifier, CrossEncoder (sentence-transformers' CrossEncoder) and
QuestionAnswerer (transformers' question-answering pipeline). Each holds one est servable; a
call runs with the GIL released, one call at a time per object (a servable's scratch is its
own): for threads running side by side, give each its own object."""
import ctypes
import json
import os
import threading

import numpy as np

from . import _lib


class _Model:
    def __init__(self, opener, path, precision, batch_size, threads):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 65536:
            raise ValueError(f"batch_size={batch_size!r}: must be an int in [1, 65536]")
        self.path = os.fsdecode(_lib.fspath(path))
        self.threads = _lib.threads_arg(threads)
        self._precision = _lib.precision_arg(precision)
        self._opener = opener
        self._lock = threading.Lock()
        self._h = None
        self._open(batch_size)

    def _open(self, batch_size):
        h = ctypes.c_void_p()
        _lib.check(self._opener(ctypes.byref(h), os.fsencode(self.path), self._precision, batch_size))
        if self._h:
            _lib.est_servable_free(self._h)
        self._h, self.max_batch = h, batch_size

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.est_servable_free(h)

    def close(self):
        with self._lock:
            self.__del__()

    def _handle(self):
        if not self._h:
            raise ValueError(f"est.{type(self).__name__}: used after close()")
        return self._h

    @property
    def precision(self):
        """The precision the model runs ("fp32", "bf16", "int8"): the one asked for, or the
        model's own, as this CPU runs it."""
        return _lib.est_precision_name(_lib.est_servable_precision(self._handle())).decode()

    def _threads(self, threads):
        return self.threads if threads is None else _lib.threads_arg(threads)


class SentenceEncoder(_Model):
    """sentence-transformers' SentenceTransformer(path).encode, on est (`est embed`):

        model = est.SentenceEncoder("all-MiniLM-L6-v2", precision="int8")
        emb = model.encode(["a sentence", "another"], batch_size=32)   # float32 [2, 384]

    path: a HuggingFace model directory (with sentence-transformers' modules.json,
    1_Pooling/config.json, sentence_bert_config.json when it has them: pooling, Normalize and
    max_seq_length as they say), or an embedding export (`est embed --export_dir`).
    precision: "fp32", "bf16", "int8", or None (an export's recorded one, else fp32)."""

    def __init__(self, path, precision=None, batch_size=32, threads=None):
        super().__init__(_lib.est_capi_embed_open, path, precision, batch_size, threads)
        self.dimension = _lib.est_servable_output_width(self._h)

    def get_sentence_embedding_dimension(self):
        return self.dimension

    def encode(self, sentences, batch_size=32, normalize_embeddings=False, prompt=None, threads=None,
               convert_to_numpy=True):
        """float32 embeddings [n, dim] (a single str: [dim]), equal bit for bit to what `est embed
        --batch_size=batch_size` writes for the same lines. normalize_embeddings: L2-normalise
        the model's output again (a model with a Normalize module is normalised already);
        prompt: prepended to every sentence, as sentence-transformers does."""
        if not convert_to_numpy:
            raise ValueError("convert_to_numpy=False: est returns numpy arrays only")
        single = isinstance(sentences, str)
        items = [sentences] if single else list(sentences)
        if prompt is not None:
            if not isinstance(prompt, str):
                raise TypeError(f"prompt: expected a str, got {type(prompt).__name__}")
            items = [prompt + s if isinstance(s, str) else s for s in items]
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 65536:
            raise ValueError(f"batch_size={batch_size!r}: must be an int in [1, 65536]")
        texts, lens, keep = _lib.texts_arg(items, "sentences")
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        threads = self._threads(threads)
        with self._lock:
            if batch_size > self.max_batch:  # room for the larger batches, so each is one forward pass
                self._open(batch_size)
            if items:
                _lib.check(_lib.est_capi_embed(self._handle(), len(items), texts, lens, batch_size, threads,
                                               out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        if normalize_embeddings:
            norm = np.linalg.norm(out, axis=1, keepdims=True).astype(np.float32)
            out = out / np.maximum(norm, np.float32(1e-12))
        return out[0] if single else out


class _Served(_Model):
    """An export of a head that answers texts (est predict / est serve)."""

    def __init__(self, path, precision, batch_size, threads, heads):
        super().__init__(_lib.est_capi_served_open, path, precision, batch_size, threads)
        self.head = _lib.est_capi_served_head(self._h).decode()
        if self.head not in heads:
            name = type(self).__name__
            self.__del__()
            raise _lib.FailedPreconditionError(f"{self.path}: a {self.head} model, not one est.{name} runs "
                                               f"(heads: {', '.join(heads)})")
        names = (ctypes.c_char_p * 4)()
        k = _lib.est_capi_served_inputs(self._h, names, 4)
        self.inputs = [names[i].decode() for i in range(k)]
        with open(os.path.join(_lib.est_servable_dir(self._h).decode(), "est_model.json"), encoding="utf-8") as f:
            self.config = json.load(f)

    def _run(self, rows, threads):
        """rows: tuples of texts in the head's input order; returns the parsed answers."""
        k = len(self.inputs)
        flat = []
        for i, r in enumerate(rows):
            for j in range(k):
                v = r[j] if j < len(r) else None
                if v is not None and not isinstance(v, str):
                    raise TypeError(f"inputs[{i}].{self.inputs[j]}: expected a str, got {type(v).__name__}")
                if v is not None and "\0" in v:  # a C string would end there
                    raise _lib.InvalidArgumentError(
                        f"inputs[{i}].{self.inputs[j]}: a NUL character at {v.index(chr(0))}")
                flat.append(None if v is None else v.encode("utf-8"))
        ptrs = (ctypes.c_char_p * max(len(flat), 1))(*flat)
        text, size = ctypes.c_void_p(), ctypes.c_size_t()
        if not rows:
            return []
        threads = self._threads(threads)
        with self._lock:
            _lib.check(_lib.est_capi_served_run(self._handle(), len(rows), ptrs, threads, ctypes.byref(text),
                                                ctypes.byref(size)))
        try:
            body = ctypes.string_at(text, size.value).decode("utf-8")
        finally:
            _lib.libc_free(text)
        return [json.loads(line) for line in body.splitlines()]


def _text_rows(inputs):
    """str | (str, str) | a list of those -> (rows, single)."""
    if isinstance(inputs, str):
        return [(inputs,)], True
    if isinstance(inputs, tuple) and len(inputs) == 2 and all(isinstance(x, str) for x in inputs):
        return [inputs], True
    rows = []
    for i, x in enumerate(inputs):
        if isinstance(x, str):
            rows.append((x,))
        elif isinstance(x, (tuple, list)) and len(x) == 2:
            rows.append(tuple(x))
        else:
            raise TypeError(f"inputs[{i}]: expected a str or a (str, str) pair, got {type(x).__name__}")
    return rows, False


class Classifier(_Served):
    """A classifier export (`est run_classifier --do_export`): predict(texts | pairs) gives the
    class probabilities [n, num_labels] in the order of .labels, as `est predict` writes them."""

    def __init__(self, path, precision=None, batch_size=32, threads=None):
        super().__init__(path, precision, batch_size, threads, ("classifier",))
        self.labels = list(self.config.get("labels", []))

    def predict(self, inputs, threads=None):
        rows, single = _text_rows(inputs)
        out = np.asarray(self._run(rows, threads), dtype=np.float32).reshape(len(rows), len(self.labels))
        return out[0] if single else out


class CrossEncoder(Classifier):
    """sentence-transformers' CrossEncoder(path).predict(pairs) / .rank(query, documents), on a
    classifier export of (query, document) pairs. The score of a pair is the probability of the
    last label: for two labels softmax's p1 = sigmoid(logit1 - logit0), the sigmoid of a
    relevance logit that sentence-transformers applies to a one-label model. A classifier of
    more labels gives all its probabilities [n, num_labels] (CrossEncoder(apply_softmax=True))."""

    def __init__(self, path, precision=None, batch_size=32, threads=None):
        super().__init__(path, precision, batch_size, threads)
        if len(self.labels) < 2:
            raise _lib.FailedPreconditionError(
                f"{self.path}: a classifier of {len(self.labels)} label(s); a cross-encoder needs 2 or more")

    def predict(self, sentences, threads=None):
        p = Classifier.predict(self, sentences, threads)
        if len(self.labels) == 2:
            return p[..., 1].copy()
        return p

    def rank(self, query, documents, top_k=None, return_documents=False, threads=None):
        """[{"corpus_id": i, "score": s (, "text": documents[i])}, ...] best first, top_k of them."""
        if not isinstance(query, str):
            raise TypeError(f"query: expected a str, got {type(query).__name__}")
        if len(self.labels) != 2:
            raise _lib.FailedPreconditionError(f"{self.path}: rank needs a 2-label classifier (one score a pair)")
        docs = list(documents)
        scores = self.predict([(query, d) for d in docs], threads) if docs else np.zeros(0, np.float32)
        order = sorted(range(len(docs)), key=lambda i: -float(scores[i]))
        if top_k is not None:
            order = order[:top_k]
        out = []
        for i in order:
            r = {"corpus_id": i, "score": float(scores[i])}
            if return_documents:
                r["text"] = docs[i]
            out.append(r)
        return out


class QuestionAnswerer(_Served):
    """A question-answering export (`est run_squad --do_export`), called as transformers'
    pipeline("question-answering"):

        qa = est.QuestionAnswerer("squad_export")
        qa(question="Who wrote it?", context="It was written by Ada.")
        # {"answer": "Ada", "score": 0.93, "start": 18, "end": 21}

    start / end are character offsets in the context (end exclusive); score is the answer's
    n-best probability. Lists of questions and contexts give a list of answers."""

    def __init__(self, path, precision=None, batch_size=32, threads=None):
        super().__init__(path, precision, batch_size, threads, ("squad",))

    def __call__(self, question=None, context=None, threads=None):
        if question is None or context is None:
            raise TypeError("QuestionAnswerer: give question= and context=")
        if isinstance(question, str) and isinstance(context, str):
            return self._answers([(question, context)], threads)[0]
        qs, cs = list(question), list(context)
        if len(qs) != len(cs):
            raise ValueError(f"{len(qs)} questions for {len(cs)} contexts")
        return self._answers(list(zip(qs, cs)), threads)

    def _answers(self, pairs, threads):
        order = self.inputs  # the head's inputs by name: question, context
        rows = [tuple({"question": q, "context": c}[name] for name in order) for q, c in pairs]
        return [{"answer": a["answer"], "score": a["score"], "start": a["start"], "end": a["end"]}
                for a in self._run(rows, threads)]
