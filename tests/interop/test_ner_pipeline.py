"""The served token classifier against transformers 4.44.2's token-classification pipeline
(docs/ner.md §6), on a freshly drawn random BertForTokenClassification with the uncased
30522-token vocab (a different model from make test's tests/data/hf/tok_ner): `est predict
--export_dir=DIR` of the HuggingFace directory as it is, ~150 varied sentences (SST-2's, empty,
emoji, CJK, accents, long), each under the five aggregation strategies: the same entities,
labels, words and character offsets, scores within 1e-5."""
import json
import os

import pytest
import torch

from conftest import DATA, est, varied_sentences

STRATEGIES = ["none", "simple", "first", "average", "max"]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "MISC"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

    out = str(tmp_path_factory.mktemp("tok_ner"))
    torch.manual_seed(4951)
    tok = BertTokenizerFast(vocab_file=os.path.join(DATA, "vocab_uncased.txt"), do_lower_case=True,
                            model_max_length=128)
    tok.save_pretrained(out)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=len(LABELS),
                     id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)},
                     attn_implementation="eager")
    model = BertForTokenClassification(cfg).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(30.0)  # labels that vary from token to token, probabilities short of 1
    model.save_pretrained(out, safe_serialization=True)
    return out, model, tok


def test_entities_equal_the_pipeline(model_dir, tmp_path):
    from transformers import pipeline

    out, model, tok = model_dir
    texts = [t for t in varied_sentences()[:150] if t.strip()]
    lines = [json.dumps({"text_a": t, "aggregation_strategy": s}) for t in texts for s in STRATEGIES]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = [json.loads(l) for l in est("predict", f"--export_dir={out}", f"--input_file={inp}",
                                      "--input_format=jsonl").splitlines()]
    assert len(got) == len(lines)
    k = 0
    worst = 0.0
    for text in texts:
        for strategy in STRATEGIES:
            nlp = pipeline("token-classification", model=model, tokenizer=tok, aggregation_strategy=strategy)
            want = nlp(text)
            have = got[k]
            k += 1
            assert len(have) == len(want), (text, strategy, have, want)
            for h, w in zip(have, want):
                assert set(h) == set(w), (text, strategy, h, w)
                for key in w:
                    if key == "score":
                        worst = max(worst, abs(h[key] - float(w[key])))
                    else:
                        assert h[key] == (w[key].item() if hasattr(w[key], "item") else w[key]), (text, strategy, h, w)
    assert worst < 1e-5, worst
