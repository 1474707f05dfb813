"""Fixtures and goldens of multi-label classification (docs/run_classifier.md §12):

  data:    tests/data/multi_label/{train,dev,test}.tsv (48 / 16 / 8 rows, "sentence<TAB>labels"
           with 0 to 3 of sports, politics, tech, comma-separated), topic words drawn with seed 49;

  sklearn: tests/data/multi_label/sklearn_golden.txt, scikit-learn 1.6.1's metrics of random
           0 / 1 labels and probabilities (predicted at >= 0.5), one case a paragraph:
             case N C
             gold  <N*C ints>
             probs <N*C float32 reprs>
             <name> <float repr>   (exact_match, micro/macro precision/recall/f1, and per label
                                    precision_i / recall_i / f1_i / support_i)
  torch:   tests/data/hf/cls_multi/, a random BertForSequenceClassification with problem_type
           "multi_label_classification" (4 labels) and golden.safetensors: input_ids /
           input_mask / segment_ids (I32 [3, 8]), labels (F32 [3, 4] of 0 / 1), logits and
           loss (torch's BCEWithLogitsLoss, the model's own).

Run from the repository root:

    python3 tests/reference/multi_label_golden.py data tests/data/multi_label
    python -m venv /tmp/skl && /tmp/skl/bin/pip install scikit-learn==1.6.1
    /tmp/skl/bin/python tests/reference/multi_label_golden.py sklearn tests/data/multi_label
    .venv-interop/bin/python tests/reference/multi_label_golden.py torch tests/data/hf/cls_multi
"""
import os
import sys


def tsv_data(out_dir):
    import random

    random.seed(49)
    topics = {"sports": ["match", "goal", "team", "coach", "league"],
              "politics": ["vote", "senate", "law", "party", "election"],
              "tech": ["chip", "software", "cloud", "robot", "code"]}
    filler = ["the", "a", "new", "big", "said", "today", "after", "and", "was", "in"]

    def rows(n):
        out = ["sentence\tlabels"]
        for _ in range(n):
            labs = sorted(random.sample(list(topics), random.choice([0, 1, 1, 2, 2, 3])))
            words = [random.choice(filler) for _ in range(3)]
            for label in labs:
                words += random.sample(topics[label], 2)
            random.shuffle(words)
            out.append(" ".join(words) + "\t" + ",".join(labs))
        return "\n".join(out) + "\n"

    for name, n in (("train.tsv", 48), ("dev.tsv", 16), ("test.tsv", 8)):
        with open(os.path.join(out_dir, name), "w") as fh:
            fh.write(rows(n))


def sklearn_cases(out_dir):
    import numpy as np
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    rng = np.random.default_rng(4949)
    lines = []
    # (n, C): small, two labels (one column would be sklearn's binary case), many labels (numpy's pairwise sum past 8 and 128), an all-zero
    # column (zero_division), every prediction negative
    for case, (n, c) in enumerate([(5, 3), (7, 2), (37, 9), (20, 130), (6, 4), (4, 2)]):
        gold = (rng.random((n, c)) < 0.4).astype(np.int64)
        probs = rng.random((n, c)).astype(np.float32)
        if case == 4:
            gold[:, 1] = 0
            probs[:, 1] = np.float32(0.1)
        if case == 5:
            probs[:] = np.float32(0.25)
        pred = (probs >= np.float32(0.5)).astype(np.int64)
        lines.append(f"case {n} {c}")
        lines.append("gold " + " ".join(str(int(v)) for v in gold.ravel()))
        lines.append("probs " + " ".join(repr(float(v)) for v in probs.ravel()))
        lines.append(f"exact_match {float(accuracy_score(gold, pred))!r}")
        for avg in ("micro", "macro"):
            p, r, f, _ = precision_recall_fscore_support(gold, pred, average=avg, zero_division=0)
            lines += [f"{avg}_precision {float(p)!r}", f"{avg}_recall {float(r)!r}", f"{avg}_f1 {float(f)!r}"]
        p, r, f, s = precision_recall_fscore_support(gold, pred, average=None, zero_division=0)
        for i in range(c):
            lines += [f"precision_{i} {float(p[i])!r}", f"recall_{i} {float(r[i])!r}", f"f1_{i} {float(f[i])!r}",
                      f"support_{i} {int(s[i])}"]
        lines.append("")
    with open(os.path.join(out_dir, "sklearn_golden.txt"), "w") as fh:
        fh.write("\n".join(lines))


def torch_model(out_dir):
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    torch.manual_seed(4949)
    os.makedirs(out_dir, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") + [
        "match", "goal", "vote", "law", "chip", "code", "the", "new", "##s"]
    with open(os.path.join(out_dir, "vocab.txt"), "w") as fh:
        fh.write("".join(t + "\n" for t in vocab))
    BertTokenizerFast(vocab_file=os.path.join(out_dir, "vocab.txt"), do_lower_case=True).save_pretrained(out_dir)
    labels = ["sports", "politics", "tech", "other"]
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=16, type_vocab_size=2,
                     num_labels=len(labels), id2label=dict(enumerate(labels)),
                     label2id={l: i for i, l in enumerate(labels)}, problem_type="multi_label_classification",
                     attn_implementation="eager", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.classifier.weight.mul_(30.0)
    model.save_pretrained(out_dir, safe_serialization=True)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(5, len(vocab), (3, 8), generator=g, dtype=torch.int32)
    ids[:, 0] = 2
    mask = torch.ones(3, 8, dtype=torch.int32)
    mask[1, 6:] = 0
    ids[1, 6:] = 0
    segs = torch.zeros(3, 8, dtype=torch.int32)
    y = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)
    with torch.no_grad():
        out = model(input_ids=ids.long(), attention_mask=mask.long(), token_type_ids=segs.long(), labels=y)
    save_file({"input_ids": ids, "input_mask": mask, "segment_ids": segs, "labels": y,
               "logits": out.logits.contiguous(), "loss": out.loss.reshape(1).contiguous()},
              os.path.join(out_dir, "golden.safetensors"))


if __name__ == "__main__":
    {"data": tsv_data, "sklearn": sklearn_cases, "torch": torch_model}[sys.argv[1]](sys.argv[2])
