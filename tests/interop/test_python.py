"""`import est` (python/, docs/python.md) against est's command line and against the Python peers:

- SentenceEncoder.encode equals `est embed` bit for bit (fp32, bf16, int8; a HuggingFace
  directory and an embedding export), and sentence-transformers' encode within 1e-5 on
  all-MiniLM-L6-v2;
- Tokenizer equals HuggingFace `tokenizers` exactly (ids, type_ids, tokens, offsets, masks) on
  the real tokenizer.json files of ../shared/data/tokenizers and on a vocab.txt
  (BertWordPieceTokenizer);
- Classifier / CrossEncoder / QuestionAnswerer equal `est predict` on exports that
  est.run_classifier / est.run_squad train here;
- TFRecordReader / TFRecordWriter / parse_example / serialize_example against TensorFlow's,
  checkpoint.load against tf.train.load_checkpoint and safetensors;
- every error of the package: its exception class and est's message;
- the GIL is released while est computes: two threads encoding at once take less wall time than
  the same two encodes one after the other.

The package is imported from python/ of this tree with the libest.so that $EST_LIBRARY names
(tests/interop/run.sh: BUILD_DIR/libest.so, built by `make interop`)."""
import json
import logging
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import CONFIG, DATA, MRPC_DIR, ROOT, VOCAB, est, varied_sentences

sys.path.insert(0, os.path.join(ROOT, "python"))
import est as estpy  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared", "data", "tokenizers")
TOKENIZER_FILES = ["t5", "albert-base-v2", "gpt2", "open-llama-3b", "bert-base-multilingual-cased"]


def one_line(sentences):
    return [s.replace("\r", " ").replace("\n", " ") for s in sentences]


def est_embed(*flags, lines):
    out = est("embed", *flags, stdin="".join(s + "\n" for s in lines).encode("utf-8"))
    return np.array([json.loads(l) for l in out.splitlines()], dtype=np.float32).reshape(len(lines), -1)


@pytest.fixture(scope="module")
def sentences():
    return one_line(varied_sentences())


# ---- loading -------------------------------------------------------------------------------

def test_library_is_this_build():
    want = os.environ.get("EST_LIBRARY")
    if want:
        assert os.path.samefile(estpy.library_path, want)
    assert estpy.__version__ == "0.1.0"


def test_missing_library_is_an_import_error(tmp_path):
    env = dict(os.environ, EST_LIBRARY=str(tmp_path / "nope.so"), PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", "import est"], env=env, capture_output=True, text=True)
    assert p.returncode != 0 and "ImportError" in p.stderr and "nope.so: no such file" in p.stderr


def test_runtime_environment_at_import():
    """As the est command line before its math commands: GOMP_SPINCOUNT=1000 unless the user set
    it or OMP_WAIT_POLICY; OpenBLAS's kernels checked once (docs/python.md §1); the user's own
    settings stand."""
    code = "import os, est; print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('EST_OPENBLAS_CHECKED'), " \
           "os.environ.get('OPENBLAS_CORETYPE'))"
    base = {k: v for k, v in os.environ.items()
            if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OPENBLAS_CORETYPE", "EST_OPENBLAS_CHECKED")}
    base["PYTHONPATH"] = os.path.join(ROOT, "python")

    def run(**env):
        p = subprocess.run([sys.executable, "-c", code], env=dict(base, **env), capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return p.stdout.split()

    spin, checked, _ = run()
    assert spin == "1000" and checked == "1"
    assert run(GOMP_SPINCOUNT="7")[0] == "7"
    assert run(OMP_WAIT_POLICY="PASSIVE")[0] == "None"
    assert run(OPENBLAS_CORETYPE="Haswell")[1:] == ["None", "Haswell"]  # the user's choice: no check


def test_error_classes():
    assert issubclass(estpy.InvalidArgumentError, (estpy.EstError, ValueError))
    assert issubclass(estpy.NotFoundError, (estpy.EstError, LookupError))
    assert issubclass(estpy.IOError, OSError)
    for cls in (estpy.OutOfRangeError, estpy.DataLossError, estpy.FailedPreconditionError, estpy.UnimplementedError,
                estpy.AbortedError, estpy.InternalError, estpy.CancelledError, estpy.ResourceExhaustedError):
        assert issubclass(cls, estpy.EstError)


# ---- Tokenizer ---------------------------------------------------------------------------------

class _Plain:
    """A tokenizers.Encoding's fields, one of them replaced."""

    def __init__(self, e, **change):
        for f in ("ids", "type_ids", "tokens", "offsets", "attention_mask", "special_tokens_mask"):
            setattr(self, f, change.get(f, getattr(e, f)))


def _fields(e):
    return (list(e.ids), list(e.type_ids), list(e.tokens), [tuple(o) for o in e.offsets], list(e.attention_mask),
            list(e.special_tokens_mask))


def _vocab_tokens(e, hf):
    """tokens, each as the vocabulary names its id. tokenizers' Encoding.tokens is that except
    for a Unigram model's unknown pieces (their own text) and an added token matched in
    normalized text (open-llama's "▁<s>"); est's tokens are always the vocabulary's
    (docs/python.md §3): those positions are compared by id."""
    return [hf.id_to_token(i) for i in e.ids]


def _same_encodings(got, want, inputs, what, hf=None):
    assert len(got) == len(want)
    if hf is not None:
        for g, w in zip(got, want):
            assert all(t == v for t, v, u in zip(g.tokens, _vocab_tokens(w, hf), w.tokens) if u != v or t != u)
        got = [_Plain(g, tokens=_vocab_tokens(g, hf)) for g in got]
        want = [_Plain(w, tokens=_vocab_tokens(w, hf)) for w in want]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if _fields(g) != _fields(w)]
    if bad:
        i = bad[0]
        pytest.fail(f"{what}: {len(bad)} of {len(inputs)} differ; first {inputs[i]!r}:\n est {_fields(got[i])}\n"
                    f" hf  {_fields(want[i])}")


@pytest.mark.parametrize("name", TOKENIZER_FILES)
def test_tokenizer_equals_tokenizers(name):
    tokenizers = pytest.importorskip("tokenizers")
    from test_tokenizers import _hf, text_lines

    path = os.path.join(SHARED, name + ".tokenizer.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} is absent")
    hf = tokenizers.Tokenizer.from_file(path)
    tok = estpy.Tokenizer.from_file(path)
    unk = hf  # the tokens tokenizers names by text rather than by id: compared by id
    lines = text_lines(3000, seed=51)
    ok, want, _ = _hf(hf, lines)
    _same_encodings(tok.encode_batch(ok, threads=2), want, ok, f"{name} encode_batch", unk)
    _same_encodings([tok.encode(x) for x in ok[:300]], [hf.encode(x) for x in ok[:300]], ok, f"{name} encode", unk)
    pairs = [(lines[i], lines[-1 - i]) for i in range(0, len(lines), 4)]
    ok, want, _ = _hf(hf, pairs)
    _same_encodings(tok.encode_batch(ok, threads=2), want, ok, f"{name} pairs", unk)
    _same_encodings([tok.encode(a, pair=b) for a, b in ok[:100]], [hf.encode(a, b) for a, b in ok[:100]], ok,
                    f"{name} encode(pair=)", unk)
    singles = [a for a, _ in ok[:50]]
    _same_encodings(tok.encode_batch(singles, add_special_tokens=False),
                    hf.encode_batch(singles, add_special_tokens=False), singles, f"{name} add_special_tokens=False",
                    unk)
    for x in lines[:200:7]:
        ids = hf.encode(x).ids
        assert tok.decode(ids) == hf.decode(ids)
        assert tok.decode(ids, skip_special_tokens=False) == hf.decode(ids, skip_special_tokens=False)
    assert tok.id_to_token(5) == hf.id_to_token(5)
    assert tok.id_to_token(10 ** 8) is None


def test_tokenizer_batch_longest_padding(minilm, sentences, tmp_path):
    """all-MiniLM-L6-v2's tokenizer.json pads to 128; with padding to the batch's longest
    (BatchLongest, as tokenizers' enable_padding() sets it) encode_batch pads as tokenizers does."""
    tokenizers = pytest.importorskip("tokenizers")
    path = os.path.join(minilm, "tokenizer.json")
    hf, tok = tokenizers.Tokenizer.from_file(path), estpy.Tokenizer.from_file(path)
    assert hf.padding["length"] == 128
    _same_encodings(tok.encode_batch(sentences[:40], threads=2), hf.encode_batch(sentences[:40]), sentences,
                    "all-MiniLM-L6-v2 encode_batch")
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    spec["padding"]["strategy"] = "BatchLongest"
    longest = tmp_path / "tokenizer.json"
    longest.write_text(json.dumps(spec), encoding="utf-8")
    hf, tok = tokenizers.Tokenizer.from_file(str(longest)), estpy.Tokenizer.from_file(longest)
    assert hf.padding["length"] is None
    for batch in (sentences[:40], sentences[40:41], [(a, b) for a, b in zip(sentences[:9], sentences[9:18])]):
        _same_encodings(tok.encode_batch(batch, threads=2), hf.encode_batch(batch), batch, "BatchLongest")
    e = tok.encode(sentences[9])
    assert len(e) == len(e.ids) == len(e.tokens) and "Encoding(num_tokens=" in repr(e)


@pytest.mark.parametrize("lowercase", [True, False])
def test_tokenizer_from_vocab_txt(sentences, lowercase):
    """A vocab.txt is tokenizers' BertWordPieceTokenizer(vocab.txt, lowercase=...)."""
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.BertWordPieceTokenizer(VOCAB, lowercase=lowercase)
    tok = estpy.Tokenizer.from_file(VOCAB, lowercase=lowercase)
    _same_encodings(tok.encode_batch(sentences), hf.encode_batch(sentences), sentences, "vocab.txt")
    pairs = list(zip(sentences[:50], sentences[50:100]))
    _same_encodings(tok.encode_batch(pairs), hf.encode_batch(pairs), pairs, "vocab.txt pairs")
    ids = hf.encode(sentences[20]).ids
    assert tok.decode(ids) == hf.decode(ids)


def test_tokenizer_errors(tmp_path):
    with pytest.raises(estpy.NotFoundError, match="nope.json: no such file"):
        estpy.Tokenizer.from_file(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": {"type": "Nope"}}')
    with pytest.raises(estpy.InvalidArgumentError, match="bad.json"):
        estpy.Tokenizer.from_file(bad)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nhello\n")
    with pytest.raises(estpy.InvalidArgumentError, match=r"vocab.txt: no \[CLS\] in the vocabulary"):
        estpy.Tokenizer.from_file(vocab)
    tok = estpy.Tokenizer.from_file(VOCAB)
    with pytest.raises(TypeError, match=r"inputs\[0\]: expected a str, got int"):
        tok.encode(3)
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected a str or a \(str, str\) pair"):
        tok.encode_batch(["a", ("a", "b", "c")])
    with pytest.raises(TypeError, match=r"inputs\[0\]: the pair must be a str"):
        tok.encode("a", pair=5)
    with pytest.raises(ValueError, match="threads=0: must be None or a positive int"):
        tok.encode_batch(["a"], threads=0)
    with pytest.raises(TypeError, match="expected a str or os.PathLike"):
        estpy.Tokenizer.from_file(5)
    tok.close()
    with pytest.raises(ValueError, match="used after close"):
        tok.encode("a")


# ---- SentenceEncoder ------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_size", [16, 1])
def test_encode_equals_est_embed(minilm, sentences, batch_size):
    model = estpy.SentenceEncoder(minilm, threads=2)
    got = model.encode(sentences, batch_size=batch_size)
    want = est_embed(f"--model_dir={minilm}", f"--batch_size={batch_size}", "--num_threads=2", lines=sentences)
    assert got.dtype == np.float32 and got.shape == want.shape == (len(sentences), 384)
    assert np.array_equal(got, want)  # bit for bit
    assert model.get_sentence_embedding_dimension() == 384 and model.precision == "fp32"


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_encode_equals_est_embed_at_precision(minilm, sentences, precision):
    model = estpy.SentenceEncoder(minilm, precision=precision, threads=2)
    want = est_embed(f"--model_dir={minilm}", f"--precision={precision}", "--num_threads=2", lines=sentences[:64])
    assert np.array_equal(model.encode(sentences[:64]), want)
    assert model.precision in (precision, "fp32")  # fp32 where this CPU lacks it (est logs why)


def test_encode_of_an_export_equals_est_embed(minilm, sentences, tmp_path):
    export = tmp_path / "export"
    est("embed", f"--model_dir={minilm}", f"--export_dir={export}")
    want = est_embed(f"--model_dir={export}", "--batch_size=32", "--num_threads=2", lines=sentences)
    assert np.array_equal(estpy.SentenceEncoder(export, threads=2).encode(sentences), want)


def test_encode_equals_sentence_transformers(minilm, sentences):
    st = pytest.importorskip("sentence_transformers")
    want = st.SentenceTransformer(minilm, device="cpu").encode(sentences, batch_size=16)
    got = estpy.SentenceEncoder(minilm).encode(sentences, batch_size=16)
    assert got.shape == want.shape
    worst = float(np.abs(got - want).max())
    assert worst < 1e-5, worst


def test_encode_shapes_and_keywords(minilm, sentences):
    model = estpy.SentenceEncoder(minilm, batch_size=8, threads=1)
    many = model.encode(sentences[:20], batch_size=8)
    one = model.encode(sentences[3])
    assert one.shape == (384,) and np.array_equal(one, model.encode([sentences[3]])[0])
    assert model.encode([]).shape == (0, 384)
    # a batch larger than the one it was opened with: reopened, still `est embed --batch_size=64`
    want = est_embed(f"--model_dir={minilm}", "--batch_size=64", "--num_threads=1", lines=sentences[:100])
    assert np.array_equal(model.encode(sentences[:100], batch_size=64), want)
    assert np.array_equal(model.encode(sentences[:20], batch_size=8, threads=2), many)
    # prompt: prepended to every sentence
    assert np.array_equal(model.encode(["a cat"], prompt="query: "), model.encode(["query: a cat"]))
    # normalize_embeddings: the model's Normalize module already made them unit vectors
    normed = model.encode(sentences[:20], batch_size=8, normalize_embeddings=True)
    assert np.abs(np.linalg.norm(normed, axis=1) - 1).max() < 1e-6 and np.abs(normed - many).max() < 1e-6
    assert model.encode(sentences[:5], batch_size=8).dtype == np.float32


def test_encode_errors(minilm, tmp_path):
    with pytest.raises(estpy.EstError, match="nope"):
        estpy.SentenceEncoder(tmp_path / "nope")
    with pytest.raises(ValueError, match=r"precision='fp16': must be 'fp32', 'bf16' or 'int8'"):
        estpy.SentenceEncoder(minilm, precision="fp16")
    with pytest.raises(ValueError, match="batch_size=0"):
        estpy.SentenceEncoder(minilm, batch_size=0)
    with pytest.raises(ValueError, match="threads=-1"):
        estpy.SentenceEncoder(minilm, threads=-1)
    model = estpy.SentenceEncoder(minilm)
    with pytest.raises(estpy.InvalidArgumentError, match=r"sentences\[1\]: a NUL byte at byte 1"):
        model.encode(["fine", "a\0b"])
    with pytest.raises(TypeError, match=r"sentences\[1\]: expected a str, got bytes"):
        model.encode(["fine", b"bytes"])
    with pytest.raises(ValueError, match="batch_size=0"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(TypeError, match="prompt: expected a str"):
        model.encode(["a"], prompt=3)
    with pytest.raises(ValueError, match="convert_to_numpy=False"):
        model.encode(["a"], convert_to_numpy=False)
    with pytest.raises(UnicodeEncodeError):
        model.encode(["\ud800"])  # a lone surrogate is no UTF-8
    model.close()
    with pytest.raises(ValueError, match="used after close"):
        model.encode(["a"])


# ---- trained exports: Classifier, CrossEncoder, QuestionAnswerer, tasks --------------------------

@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("py_cls") / "out"
    results = estpy.run_classifier(
        task_name="mrpc", do_train=True, do_eval=True, do_export=True, data_dir=MRPC_DIR, vocab_file=VOCAB,
        bert_config_file=CONFIG, output_dir=str(out), max_seq_length=32, train_batch_size=2, num_train_epochs=1,
        learning_rate=1e-3, seed=7, num_threads=2)
    return {"dir": str(out), "export": str(out / "export"), "results": results}


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("py_squad") / "out"
    results = estpy.run_squad(
        do_train=True, do_export=True, train_file=os.path.join(DATA, "squad", "edge_v1.json"), vocab_file=VOCAB,
        bert_config_file=CONFIG, output_dir=str(out), max_seq_length=64, doc_stride=32, max_query_length=16,
        train_batch_size=2, num_train_epochs=1, num_threads=2)
    return {"export": str(out / "export"), "results": results}


def test_run_classifier_returns_eval_results(classifier_run):
    with open(os.path.join(classifier_run["dir"], "eval_results.txt")) as f:
        want = {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}
    got = classifier_run["results"]
    assert set(got) == set(want) and all(float(got[k]) == want[k] for k in want)
    assert isinstance(got["global_step"], int) and 0 <= got["eval_accuracy"] <= 1


def test_task_logging_and_errors(caplog, tmp_path, classifier_run):
    with caplog.at_level(logging.INFO, logger="est"):
        r = estpy.run_classifier(task_name="mrpc", do_eval=True, data_dir=MRPC_DIR, vocab_file=VOCAB,
                                 bert_config_file=CONFIG, output_dir=classifier_run["dir"], max_seq_length=32,
                                 num_threads=2)
    assert "eval_accuracy" in r
    assert any(rec.name == "est" and "eval_accuracy" in rec.getMessage() for rec in caplog.records)
    with pytest.raises(estpy.InvalidArgumentError, match="est run_classifier: .*--bert_config_file"):
        estpy.run_classifier(task_name="mrpc", output_dir=str(tmp_path))
    with pytest.raises(estpy.InvalidArgumentError, match="est run_classifier: .*no_such_flag"):
        estpy.run_classifier(no_such_flag=1, output_dir=str(tmp_path))
    with pytest.raises(estpy.EstError, match="est run_classifier: .*nope"):
        estpy.run_classifier(task_name="mrpc", do_eval=True, data_dir=str(tmp_path / "nope"), vocab_file=VOCAB,
                             bert_config_file=CONFIG, output_dir=str(tmp_path / "out"))
    with pytest.raises(TypeError, match=r"learning_rate=\[1\]"):
        estpy.run_classifier(learning_rate=[1])
    assert estpy.run_squad.__doc__ and estpy.run_ner.__doc__ and estpy.run_pretraining.__doc__


def _est_predict(export, lines, *flags):
    return est("predict", f"--export_dir={export}", "--num_threads=2", *flags,
               stdin="".join(l + "\n" for l in lines).encode("utf-8")).splitlines()


def test_classifier_equals_est_predict(classifier_run, sentences):
    c = estpy.Classifier(classifier_run["export"], threads=2)
    assert c.labels == ["0", "1"] and c.head == "classifier" and c.inputs == ["text_a", "text_b"]
    texts = [s.replace("\t", " ") for s in sentences[:70]]
    pairs = list(zip(texts[:35], texts[35:]))
    want = np.array([[float(x) for x in l.split("\t")] for l in _est_predict(classifier_run["export"], texts)],
                    dtype=np.float32)
    assert np.array_equal(c.predict(texts), want)
    want = np.array([[float(x) for x in l.split("\t")]
                     for l in _est_predict(classifier_run["export"], [a + "\t" + b for a, b in pairs])],
                    dtype=np.float32)
    assert np.array_equal(c.predict(pairs), want)
    assert np.array_equal(c.predict(pairs[0]), want[0]) and c.predict(texts[0]).shape == (2,)
    assert c.predict([]).shape == (0, 2)
    assert c.precision == "fp32"


def test_cross_encoder(classifier_run, sentences):
    c = estpy.Classifier(classifier_run["export"])
    ce = estpy.CrossEncoder(classifier_run["export"])
    docs = sentences[20:40]
    pairs = [("a film about love", d) for d in docs]
    scores = ce.predict(pairs)
    assert np.array_equal(scores, c.predict(pairs)[:, 1]) and scores.shape == (20,)
    ranked = ce.rank("a film about love", docs, top_k=5, return_documents=True)
    order = sorted(range(20), key=lambda i: -float(scores[i]))[:5]
    assert [r["corpus_id"] for r in ranked] == order
    assert [r["text"] for r in ranked] == [docs[i] for i in order]
    assert all(r["score"] == float(scores[r["corpus_id"]]) for r in ranked)
    assert len(ce.rank("q", docs)) == 20 and ce.rank("q", []) == []
    with pytest.raises(TypeError, match="query: expected a str"):
        ce.rank(3, docs)


def test_question_answerer_equals_est_predict(squad_run):
    qa = estpy.QuestionAnswerer(squad_run["export"], threads=2)
    assert qa.head == "squad" and squad_run["results"] == {}
    items = [("Who wrote it?", "It was written by Ada Lovelace in 1843."),
             ("What sat?", "The cat sat on the mat. " * 20),
             ("\u00bfQu\u00e9?", "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \U0001F600 emoji")]
    want = [json.loads(l) for l in
            _est_predict(squad_run["export"], [json.dumps({"question": q, "context": c}) for q, c in items])]
    got = qa(question=[q for q, _ in items], context=[c for _, c in items])
    assert got == want
    one = qa(question=items[0][0], context=items[0][1])
    assert one == want[0] and set(one) == {"answer", "score", "start", "end"}
    assert items[0][1][one["start"]:one["end"]] == one["answer"]  # character offsets
    with pytest.raises(TypeError, match="give question= and context="):
        qa(question="a")
    with pytest.raises(ValueError, match="2 questions for 1 contexts"):
        qa(question=["a", "b"], context=["c"])


def test_export_of_another_head_is_refused(classifier_run, squad_run, minilm):
    with pytest.raises(estpy.FailedPreconditionError, match="a squad model, not one est.Classifier runs"):
        estpy.Classifier(squad_run["export"])
    with pytest.raises(estpy.FailedPreconditionError, match="a classifier model, not one est.QuestionAnswerer"):
        estpy.QuestionAnswerer(classifier_run["export"])
    with pytest.raises(estpy.InvalidArgumentError, match="the export's head is \"classifier\"; an embedding export"):
        estpy.SentenceEncoder(classifier_run["export"])
    # a HuggingFace directory is served as it is when it has a served head; a BertModel has none
    with pytest.raises(estpy.InvalidArgumentError, match="names BertModel, which no served head takes"):
        estpy.Classifier(minilm)
    c = estpy.Classifier(classifier_run["export"])
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected a str or a \(str, str\) pair"):
        c.predict(["a", 3])
    with pytest.raises(TypeError, match=r"inputs\[0\].text_b: expected a str"):
        c.predict([("a", 3)])
    with pytest.raises(estpy.InvalidArgumentError, match=r"inputs\[1\].text_a: a NUL character at 2"):
        c.predict(["fine", "ab\0c"])


# ---- records, Examples, checkpoints ----------------------------------------------------------------

@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_tfrecords_against_tensorflow(tf, tmp_path, compression):
    feats = [{"input_ids": [101, 2023, 102], "label": 1, "score": [0.5, -2.25], "text": ["h\u00e9llo", b"\x00\xff"]},
             {"input_ids": [], "label": [7, 8], "empty_bytes": [b""]}]
    path = str(tmp_path / "est.tf_record")
    with estpy.TFRecordWriter(path, compression) as w:
        for f in feats:
            w.write(estpy.serialize_example(f))
    got = [r for r in tf.data.TFRecordDataset(path, compression_type=compression or "").as_numpy_iterator()]
    assert len(got) == 2
    ex = tf.train.Example.FromString(got[0])
    assert list(ex.features.feature["input_ids"].int64_list.value) == [101, 2023, 102]
    assert list(ex.features.feature["score"].float_list.value) == [0.5, -2.25]
    assert list(ex.features.feature["text"].bytes_list.value) == ["h\u00e9llo".encode(), b"\x00\xff"]
    # and TensorFlow's file read back by est
    tf_path = str(tmp_path / "tf.tf_record")
    opts = tf.io.TFRecordOptions(compression_type=compression or "")
    with tf.io.TFRecordWriter(tf_path, opts) as w:
        for r in got:
            w.write(r)
        w.write(b"raw bytes, not an Example")
    with estpy.TFRecordReader(tf_path, compression) as r:
        records = list(r)
    assert records[:2] == got and records[2] == b"raw bytes, not an Example"
    p = estpy.parse_example(records[0])
    assert p["input_ids"].dtype == np.int64 and p["input_ids"].tolist() == [101, 2023, 102]
    assert p["label"].tolist() == [1] and p["score"].dtype == np.float32 and p["score"].tolist() == [0.5, -2.25]
    assert p["text"] == ["h\u00e9llo".encode(), b"\x00\xff"]
    p = estpy.parse_example(records[1])
    assert p["label"].tolist() == [7, 8] and p["empty_bytes"] == [b""] and p["input_ids"].size == 0
    assert tf.train.Example.FromString(got[1]).features.feature["input_ids"].WhichOneof("kind") == "float_list"
    assert estpy.parse_example(tf.train.Example().SerializeToString()) == {}


def test_tfrecord_errors(tmp_path):
    with pytest.raises(estpy.EstError, match="nope.tf_record"):
        estpy.TFRecordReader(tmp_path / "nope.tf_record")
    with pytest.raises(estpy.InvalidArgumentError, match="unknown compression type 'LZ4'"):
        estpy.TFRecordReader(tmp_path / "x", "LZ4")
    path = tmp_path / "a.tf_record"
    with estpy.TFRecordWriter(path) as w:
        w.write(b"0123456789")
        w.write(b"abc")
        with pytest.raises(TypeError, match="record: expected bytes"):
            w.write("str")
    with pytest.raises(ValueError, match="write after close"):
        w.write(b"x")
    data = bytearray(path.read_bytes())
    data[14] ^= 0xFF  # a payload byte of the first record
    bad = tmp_path / "bad.tf_record"
    bad.write_bytes(bytes(data))
    with pytest.raises(estpy.DataLossError, match="bad.tf_record: corrupted record at"):
        list(estpy.TFRecordReader(bad))
    cut = tmp_path / "cut.tf_record"
    cut.write_bytes(path.read_bytes()[:-3])
    with estpy.TFRecordReader(cut) as r:
        assert next(r) == b"0123456789"
        with pytest.raises(estpy.DataLossError, match="truncated record"):
            next(r)
    # leaving the with block by an exception leaves no file
    with pytest.raises(RuntimeError):
        with estpy.TFRecordWriter(tmp_path / "gone.tf_record") as w:
            w.write(b"x")
            raise RuntimeError
    assert not (tmp_path / "gone.tf_record").exists()
    with pytest.raises(estpy.InvalidArgumentError, match="Could not parse example input"):
        estpy.parse_example(b"\xff\xff\xff")
    with pytest.raises(TypeError, match="serialized: expected bytes"):
        estpy.parse_example("text")
    with pytest.raises(TypeError, match="feature 'x': values must be"):
        estpy.serialize_example({"x": [object()]})


def test_checkpoint_load_tf(tf, classifier_run):
    prefix = os.path.join(classifier_run["dir"], "model.ckpt-5")
    got = estpy.checkpoint.load(prefix)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    assert set(got) == set(shapes)
    for name in shapes:
        want = reader.get_tensor(name)
        assert got[name].dtype == want.dtype and np.array_equal(got[name], want), name
    latest = estpy.checkpoint.load(classifier_run["dir"])  # a directory: its latest checkpoint
    assert set(latest) == set(got)


def test_checkpoint_load_safetensors(minilm, tmp_path):
    from safetensors.numpy import load_file, save_file

    path = os.path.join(minilm, "model.safetensors")
    want = load_file(path)
    for got in (estpy.checkpoint.load(path), estpy.checkpoint.load(minilm)):
        assert set(got) == set(want)
        assert all(got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]) for k in want)
    kinds = {"i8": np.arange(-3, 3, dtype=np.int8), "f16": np.array([0.5, -1], np.float16),
             "i64": np.array([[1, 2], [3, 4]], np.int64), "b": np.array([True, False])}
    save_file(kinds, str(tmp_path / "k.safetensors"))
    got = estpy.checkpoint.load(tmp_path / "k.safetensors")
    assert all(got[k].dtype == v.dtype and np.array_equal(got[k], v) for k, v in kinds.items())


def test_checkpoint_errors(tmp_path):
    with pytest.raises(estpy.EstError, match="nope"):
        estpy.checkpoint.load(tmp_path / "nope")
    with pytest.raises(estpy.NotFoundError, match="no model.safetensors"):
        estpy.checkpoint.load(tmp_path)  # a directory of neither
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(estpy.EstError, match="bad.safetensors"):
        estpy.checkpoint.load(tmp_path / "bad.safetensors")


# ---- the GIL -------------------------------------------------------------------------------------------

def test_gil_is_released_while_encoding(minilm, sentences):
    """Two threads encoding at once (one OpenMP thread each, a model each) take less wall time than
    the same two encodes one after the other: est runs without the GIL. On a machine shared with
    other builds the gain is less than 2x; the check asks for 15%, and takes the best of 3 tries."""
    texts = sentences[:96]
    models = [estpy.SentenceEncoder(minilm, threads=1) for _ in range(2)]
    for m in models:
        m.encode(texts[:8])  # warm: weights packed, threads started

    def work(m):
        m.encode(texts, batch_size=16)

    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        work(models[0])
        work(models[1])
        serial = time.perf_counter() - t0
        threads = [threading.Thread(target=work, args=(m,)) for m in models]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        parallel = time.perf_counter() - t0
        best = min(best or 9e9, parallel / serial)
        if best < 0.85:
            break
    assert best < 0.85, f"two threads at once took {best:.2f} of the time one after the other took"


def test_python_runs_while_est_computes(minilm, sentences):
    """The main thread keeps counting while another thread is inside one long encode call: at
    least a fifth of the rate it counts at alone (with the GIL held by the call it would count
    only in the moments before and after)."""
    model = estpy.SentenceEncoder(minilm, threads=1)
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.3:
        count += 1
    rate = count / (time.perf_counter() - t0)
    inside, done = threading.Event(), threading.Event()

    def work():
        inside.set()
        model.encode(sentences * 2, batch_size=32)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    inside.wait()
    count, t0 = 0, time.perf_counter()
    while not done.is_set():
        count += 1
    elapsed = time.perf_counter() - t0
    t.join()
    assert count > 0.2 * rate * elapsed, (count, rate, elapsed)


# ---- examples/python --------------------------------------------------------------------------------

@pytest.mark.parametrize("script, args, expect", [
    ("embed_and_search.py", ["MINILM"], "A man is eating food."),
    ("rerank.py", [], "[0]"),
    ("classify.py", [], "eval: {'eval_accuracy'"),
    ("tokenize_text.py", [], "['[CLS]', 'hello', ',', 'y', \"'\", 'all'"),
    ("read_records.py", [], "2 {'input_ids': [101, 2002, 102], 'label_ids': [0], 'text': [b'example 2'], 'weight': [1.0]}"),
])
def test_examples_run(minilm, script, args, expect):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    args = [minilm if a == "MINILM" else a for a in args]
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", script), *args], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert expect in p.stdout, p.stdout
