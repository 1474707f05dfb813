"""Sentence embeddings of a HuggingFace directory (docs/embeddings.md §3, docs/hf.md):
`est embed --model_dir=all-MiniLM-L6-v2 --normalize` against sentence-transformers'
encode(normalize_embeddings=True) when that package is installed, else the same computed from
transformers' BertModel (mean of last_hidden_state over the attention mask, truncated at
sentence_bert_config.json's 256 tokens, then L2-normalised: what sentence-transformers' modules.json
Transformer -> Pooling(mean) -> Normalize does), within 1e-5 on ~300 varied sentences; and the
same vectors from `est serve`'s POST /embed on an export written by `est embed --export_dir`.
"""
import http.client
import json
import os
import subprocess

import pytest
import torch

from conftest import EST, est, varied_sentences


def reference_embeddings(model_dir, sentences):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        SentenceTransformer = None
    if SentenceTransformer is not None:
        model = SentenceTransformer(model_dir, device="cpu")
        return torch.tensor(model.encode(sentences, normalize_embeddings=True, batch_size=16))
    from transformers import AutoTokenizer, BertModel

    with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
        max_len = json.load(f)["max_seq_length"]
    model = BertModel.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    out = []
    for s in sentences:
        enc = tok(s, truncation=True, max_length=max_len, return_tensors="pt")
        with torch.no_grad():
            h = model(**enc).last_hidden_state[0]
        m = enc["attention_mask"][0].unsqueeze(-1).float()
        mean = (h * m).sum(0) / m.sum().clamp(min=1e-9)
        out.append(torch.nn.functional.normalize(mean, p=2, dim=0))
    return torch.stack(out)


def one_line(sentences):
    return [s.replace("\r", " ").replace("\n", " ") for s in sentences]


@pytest.fixture(scope="module")
def reference(minilm):
    sentences = one_line(varied_sentences())
    return sentences, reference_embeddings(minilm, sentences)


def test_est_embed_equals_sentence_transformers(minilm, reference, tmp_path):
    sentences, want = reference
    inp = tmp_path / "in.txt"
    inp.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    got = torch.tensor([json.loads(line) for line in
                        est("embed", f"--model_dir={minilm}", "--normalize", f"--input_file={inp}",
                            "--batch_size=16", "--num_threads=2").splitlines()])
    assert got.shape == want.shape and got.shape[0] >= 300 and got.shape[1] == 384
    worst = (got - want).abs().max().item()
    assert worst < 1e-5, worst
    # without --normalize: modules.json's Normalize module turns it on all the same
    first = est("embed", f"--model_dir={minilm}", "--num_threads=2", stdin=(sentences[2] + "\n").encode())
    assert (torch.tensor(json.loads(first)) - want[2]).abs().max().item() < 1e-5


def test_est_serve_embed_equals_sentence_transformers(minilm, reference, tmp_path):
    sentences, want = reference
    picked = [0, 2, 3, 4, 5, 11, 12, 20]  # empty, punctuation, emoji, CJK, Hangul, 150 letters, 300 words, SST-2
    export = tmp_path / "export"
    est("embed", f"--model_dir={minilm}", f"--export_dir={export}")
    server = subprocess.Popen([EST, "serve", f"--model_base_path={export}", "--rest_api_port=0", "--num_threads=2"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        assert "listening on" in line, line
        port = int(line.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/embed", json.dumps({"inputs": [sentences[i] for i in picked], "truncate": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body
        got = torch.tensor(json.loads(body))
        worst = (got - want[picked]).abs().max().item()
        assert worst < 1e-5, worst
    finally:
        server.terminate()
        server.wait(timeout=30)
