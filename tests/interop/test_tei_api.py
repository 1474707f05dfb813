"""est serve's text-embeddings-inference routes (docs/serving.md §6) judged by TEI's own
OpenAPI document and by HuggingFace tokenizers.

Every answer of every route, the errors included, is validated against the schema that
../shared/data/tei/openapi.json (TEI 1.9.3, read from there, never copied) gives for that path
and status: a small checker of the OpenAPI 3.0 subset the file uses ($ref, type, format,
properties, required, additionalProperties, items, minItems / maxItems, oneOf, allOf, enum,
nullable, minimum). /tokenize is compared with `tokenizers` on the same vocabulary: a
vocab.txt export (BertTokenizerFast of it) and all-MiniLM-L6-v2's tokenizer.json. The HTTP
client is `requests` (a dependency of transformers, already in the venv)."""
import json
import os
import subprocess

import pytest
import requests
from conftest import DATA, EST, ROOT, est

OPENAPI = os.environ.get("EST_TEI_OPENAPI") or os.path.join(ROOT, "..", "shared", "data", "tei", "openapi.json")


@pytest.fixture(scope="module")
def spec():
    if not os.path.exists(OPENAPI):
        pytest.skip(f"{OPENAPI} is not here (set $EST_TEI_OPENAPI)")
    with open(OPENAPI, encoding="utf-8") as f:
        return json.load(f)


# ---- the checker ----------------------------------------------------------------------------


def problems(spec, schema, value, where="$"):
    """What is wrong with value under an OpenAPI 3.0 schema: a list of strings, empty when valid."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return problems(spec, spec["components"]["schemas"][name], value, where)
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: null, not nullable"]
    out = []
    if "allOf" in schema:
        for s in schema["allOf"]:
            out += problems(spec, s, value, where)
    if "oneOf" in schema:
        matching = [s for s in schema["oneOf"] if not problems(spec, s, value, where)]
        if len(matching) != 1:
            out.append(f"{where}: matches {len(matching)} of oneOf's {len(schema['oneOf'])} schemas")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} not in {schema['enum']}")
    t = schema.get("type")
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t in kinds and not isinstance(value, kinds[t]):
        return out + [f"{where}: {type(value).__name__}, not {t}"]
    if t == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        return out + [f"{where}: {value!r} is not an integer"]
    if t == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return out + [f"{where}: {value!r} is not a number"]
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        out.append(f"{where}: {value} below {schema['minimum']}")
    if t == "object":
        for k in schema.get("required", []):
            if k not in value:
                out.append(f"{where}: no {k!r}")
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                out += problems(spec, props[k], v, f"{where}.{k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += problems(spec, schema["additionalProperties"], v, f"{where}.{k}")
    if t == "array":
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{where}: {len(value)} items, below {schema['minItems']}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(f"{where}: {len(value)} items, above {schema['maxItems']}")
        for i, v in enumerate(value):
            out += problems(spec, schema.get("items", {}), v, f"{where}[{i}]")
    return out


def test_the_checker_refuses_what_it_should(spec):
    err = {"$ref": "#/components/schemas/ErrorResponse"}
    assert not problems(spec, err, {"error": "x", "error_type": "Validation"})
    assert problems(spec, err, {"error": "x", "error_type": "validation"})  # the enum is capitalised
    assert problems(spec, err, {"error": "x"})
    pred = {"$ref": "#/components/schemas/PredictResponse"}
    assert not problems(spec, pred, [{"score": 0.5, "label": "a"}])
    assert problems(spec, pred, [{"score": "0.5", "label": "a"}])
    assert problems(spec, {"$ref": "#/components/schemas/PredictInput"}, ["a", "b", "c"])


class Server:
    def __init__(self, base, *flags):
        self.p = subprocess.Popen([EST, "serve", f"--model_base_path={base}", "--model_name=m", "--rest_api_port=0",
                                   "--num_threads=2", "--file_system_poll_wait_seconds=0", *flags],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        assert "listening on" in line, line
        self.url = "http://127.0.0.1:" + line.rsplit(":", 1)[1].strip()

    def close(self):
        self.p.terminate()
        assert self.p.wait(timeout=60) == 0


def call(spec, server, path, body=None, status=200):
    """One request; the answer is checked against openapi.json for (path, status)."""
    r = requests.post(server.url + path, json=body, timeout=60) if body is not None else \
        requests.get(server.url + path, timeout=60)
    assert r.status_code == status, (path, body, r.status_code, r.text)
    op = spec["paths"][path]["post" if body is not None else "get"]
    content = op["responses"][str(status)].get("content", {})
    if "application/json" in content:
        got = r.json()
        bad = problems(spec, content["application/json"]["schema"], got)
        assert not bad, (path, body, status, bad, got)
        return got
    return r.text


@pytest.fixture(scope="module")
def exports(tmp_path_factory, minilm):
    d = tmp_path_factory.mktemp("tei")
    est("run_classifier", "--do_train", "--do_export", "--task_name=tsv", "--tsv_labels=bright,dull",
        "--tsv_test_label_column=-1", f"--data_dir={DATA}/run_classifier/jack", f"--vocab_file={DATA}/vocab_uncased.txt",
        f"--bert_config_file={DATA}/run_classifier/bert_config_h32.json", "--max_seq_length=32",
        "--train_batch_size=8", "--num_train_epochs=2", "--num_threads=2", f"--output_dir={d}/cls")
    est("embed", f"--model_dir={minilm}", f"--export_dir={d}/minilm")
    return {"classifier": f"{d}/cls/export", "embedding": f"{d}/minilm"}


TEXTS = ["Hello, World!", "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m",
         "\u4e2d\u6587\u7684\u53e5\u5b50\u3002 mixed", "\U0001F600 emoji", "unwantedrunning [SEP] x", ""]


def test_classifier_routes_follow_openapi(spec, exports):
    s = Server(exports["classifier"], "--max_client_batch_size=4", "--max_concurrent_requests=8")
    try:
        assert call(spec, s, "/health") == ""
        info = call(spec, s, "/info")
        assert info["model_type"]["classifier"]["id2label"] == {"0": "bright", "1": "dull"}
        assert call(spec, s, "/metrics").count("te_predict_count") >= 1
        call(spec, s, "/predict", {"inputs": "jack is a dull boy"})
        call(spec, s, "/predict", {"inputs": ["jack", "a dull boy"], "raw_scores": True})
        call(spec, s, "/predict", {"inputs": [["jack"], ["jack", "a dull boy"]]})
        call(spec, s, "/tokenize", {"inputs": TEXTS[:4]})
        call(spec, s, "/decode", {"ids": [[101, 2990, 102], [2990]], "skip_special_tokens": False})
        # each error status the paths declare, in TEI's shape
        call(spec, s, "/predict", {"inputs": []}, 400)
        call(spec, s, "/predict", {"inputs": [["a"]] * 5}, 413)
        call(spec, s, "/predict", {"inputs": " ".join(["jack"] * 40)}, 413)
        call(spec, s, "/predict", {"inputs": " ".join(["jack"] * 40), "truncate": True})
        call(spec, s, "/predict", {"inputs": 5}, 422)
        call(spec, s, "/rerank", {"query": "a", "texts": ["b"]}, 424)
        call(spec, s, "/embed", {"inputs": "a"}, 424)
        call(spec, s, "/embed_all", {"inputs": "a"}, 424)  # a classifier has no embeddings
        call(spec, s, "/embed_sparse", {"inputs": "a"}, 424)
        call(spec, s, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}}, 424)
        call(spec, s, "/tokenize", {"inputs": []}, 400)
        call(spec, s, "/tokenize", {"inputs": ["a"] * 5}, 413)
        call(spec, s, "/tokenize", {"inputs": [1]}, 422)
        call(spec, s, "/decode", {"ids": []}, 400)
        call(spec, s, "/decode", {"ids": ["x"]}, 422)
        call(spec, s, "/v1/embeddings", {"input": "a"}, 424)
    finally:
        s.close()


def test_embedding_routes_follow_openapi(spec, exports):
    s = Server(exports["embedding"], "--max_client_batch_size=4")
    try:
        info = call(spec, s, "/info")
        assert info["model_type"] == {"embedding": {"pooling": "mean"}}
        assert info["max_input_length"] > 0
        vecs = call(spec, s, "/embed", {"inputs": ["a good film", "a bad film"]})
        assert len(vecs[0]) == 384
        assert len(call(spec, s, "/embed", {"inputs": "a", "dimensions": 64})[0]) == 64
        sim = call(spec, s, "/similarity", {"inputs": {"source_sentence": "a good film",
                                                       "sentences": ["a bad film", "a good film"]}})
        assert abs(sim[1] - 1) < 1e-5
        assert abs(sim[0] - sum(a * b for a, b in zip(vecs[0], vecs[1]))) < 1e-5
        per_token = call(spec, s, "/embed_all", {"inputs": ["a good film", "a"]})
        assert [len(t) for t in per_token] == [5, 3] and len(per_token[0][0]) == 384
        call(spec, s, "/embed_all", {"inputs": []}, 400)
        call(spec, s, "/embed_sparse", {"inputs": "a"}, 424)
        out = call(spec, s, "/v1/embeddings", {"input": ["a", "b"], "model": "x"})
        assert out["model"] == "x" and len(out["data"]) == 2
        call(spec, s, "/embed", {"inputs": []}, 400)
        call(spec, s, "/embed", {"inputs": ["a"] * 5}, 413)
        call(spec, s, "/embed", {"inputs": "a", "normalize": "yes"}, 422)
        call(spec, s, "/predict", {"inputs": "a"}, 424)
        call(spec, s, "/rerank", {"query": "a", "texts": ["b"]}, 424)
        call(spec, s, "/similarity", {"inputs": {"source_sentence": "a", "sentences": []}}, 400)
        call(spec, s, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"] * 4}}, 413)
    finally:
        s.close()


def byte_offsets(text, start, stop):
    return len(text[:start].encode()), len(text[:stop].encode())


def check_tokenize(got, tok, texts, add_special):
    """/tokenize's answer against tokenizers' Encoding: ids, special tokens and UTF-8 offsets."""
    for text, tokens in zip(texts, got):
        enc = tok.encode(text, add_special_tokens=add_special)
        assert [t["id"] for t in tokens] == enc.ids, text
        for t, tid, tokstr, special, (a, b) in zip(tokens, enc.ids, enc.tokens, enc.special_tokens_mask,
                                                     enc.offsets):
            assert t["special"] == bool(special), (text, t)
            if special:
                assert t["text"] == tokstr and t["start"] is None and t["stop"] is None, (text, t)
            else:
                ba, bb = byte_offsets(text, a, b)
                assert (t["start"], t["stop"]) == (ba, bb), (text, t, (a, b))
                assert t["text"] == text.encode()[ba:bb].decode(), (text, t)


def test_tokenize_equals_hf_tokenizers(spec, exports, minilm):
    from tokenizers import Tokenizer
    from transformers import BertTokenizerFast
    cases = [(exports["classifier"], BertTokenizerFast(os.path.join(DATA, "vocab_uncased.txt"))._tokenizer),
             (exports["embedding"], Tokenizer.from_file(os.path.join(minilm, "tokenizer.json")))]
    for base, tok in cases:
        tok.no_truncation()
        tok.no_padding()
        s = Server(base, "--max_client_batch_size=64")
        try:
            for add_special in (True, False):
                got = call(spec, s, "/tokenize", {"inputs": TEXTS, "add_special_tokens": add_special})
                check_tokenize(got, tok, TEXTS, add_special)
            ids = [tok.encode(t).ids for t in TEXTS]
            for skip in (True, False):
                got = call(spec, s, "/decode", {"ids": ids, "skip_special_tokens": skip})
                assert got == [tok.decode(i, skip_special_tokens=skip) for i in ids]
        finally:
            s.close()
