"""est run_rerank's HuggingFace export against sentence-transformers 3.0.1's CrossEncoder
(docs/rerank.md §5, §6): a cross-encoder fine-tuned by est from all-MiniLM-L6-v2 on
tests/data/rerank (15 steps: enough to move every weight), exported with --export_format=hf;
CrossEncoder(DIR).predict and `est rerank` (on that directory, and on est's own export of the
same checkpoint) give the same scores within 1e-5, sigmoid and raw, on test.tsv's pairs and
~150 varied passages (emoji, CJK, accents, long: truncated alike).

Left out: in the HF directory, a word ending in a capital sigma: the directory has vocab.txt
(est's HF export writes no tokenizer.json), which est reads with BERT's FullTokenizer,
lower-casing as Python's str.lower() does (final sigma: "ΔΟΣ" -> "δος"), where transformers'
fast tokenizer gives "δοσ"; est's own export keeps all-MiniLM-L6-v2's tokenizer.json and
agrees. Likewise a word of over 100 characters (a 150-"x" word: not investigated further).
And an empty passage, where the reference's convert_single_example (which est keeps,
docs/run_classifier.md §4) drops the second [SEP] and transformers' tokenizer does not
(docs/rerank.md §6)."""
import os

import pytest
import torch

from conftest import DATA, est, varied_sentences

RERANK = os.path.join(DATA, "rerank")
SEQ = 64


@pytest.fixture(scope="module")
def trained(minilm, tmp_path_factory):
    out = tmp_path_factory.mktemp("rerank")
    common = [f"--data_dir={RERANK}", f"--init_checkpoint={minilm}", f"--bert_config_file={minilm}",
              f"--output_dir={out}/run", f"--max_seq_length={SEQ}", "--num_threads=2"]
    est("run_rerank", *common, "--do_train", "--train_batch_size=8", "--learning_rate=1e-4",
        "--num_train_epochs=1")
    est("run_rerank", *common, "--do_export", f"--export_dir={out}/export")
    est("run_rerank", *common, "--do_export", "--export_format=hf", f"--export_dir={out}/hf")
    return out


def pairs():
    rows = [l.split("\t") for l in open(os.path.join(RERANK, "test.tsv"), encoding="utf-8").read().splitlines()[1:]]
    out = [(q, p) for q, p, _ in rows]
    texts = [t.replace("\n", " ").replace("\r", " ") for t in varied_sentences()[:150] if t.strip()]
    for q in ("about team game", "what is the capital of france"):
        out += [(q, t) for t in texts]
    return out


def hf_vocab_txt_differs(text):
    """The two texts of varied_sentences() that est's FullTokenizer over vocab.txt and
    transformers' BertTokenizerFast over the same vocab.txt tokenize differently (see above)."""
    return "\u03a3" in text or any(len(w) > 100 for w in text.split())


def est_scores(model_dir, query, passages, tmp_path, raw):
    f = tmp_path / "passages.txt"
    f.write_text("".join(p + "\n" for p in passages), encoding="utf-8")
    args = [f"--model_dir={model_dir}", f"--query={query}", f"--input_file={f}"] + (["--raw_scores"] if raw else [])
    scores = [None] * len(passages)
    for line in est("rerank", *args).splitlines():
        i, s = line.split("\t")
        scores[int(i)] = float(s)
    return scores


@pytest.mark.parametrize("raw", [False, True])
def test_cross_encoder_loads_the_export(trained, tmp_path, raw):
    from sentence_transformers import CrossEncoder

    kw = {"activation_fct": torch.nn.Identity()} if raw else {}
    all_pairs = pairs()
    by_query = {}
    for k, (q, p) in enumerate(all_pairs):
        by_query.setdefault(q, []).append((k, p))
    # est serves the HF directory at its tokenizer's model_max_length (the model's 512
    # positions), its own export at the trained max_seq_length: CrossEncoder truncates alike
    for d, max_length in (("hf", None), ("export", SEQ)):
        model = CrossEncoder(str(trained / "hf"), max_length=max_length, device="cpu")
        want = model.predict(all_pairs, batch_size=32, **kw)
        assert max(want) - min(want) > 1e-2, "the scores hardly differ: the check would be weak"
        bad = []
        for q, items in by_query.items():
            got = est_scores(trained / d, q, [p for _, p in items], tmp_path, raw)
            bad += [(d, q, p, g, float(want[k])) for (k, p), g in zip(items, got)
                    if abs(g - float(want[k])) > 1e-5 and not (d == "hf" and hf_vocab_txt_differs(p))]
        assert not bad, bad
