"""Writes tests/data/ner/seqeval_golden.txt: random tag sequences in IOB2, IOB1, IOBES and
BILOU with seqeval's default-mode scores, which tests/test_ner_data.c compares est's
(src/ner/ner_metrics.c) against. Made with seqeval 1.2.2 (PyPI), numpy 2.4.6,
scikit-learn 1.9.1:

    python3 -m venv /tmp/v && /tmp/v/bin/pip install seqeval==1.2.2
    /tmp/v/bin/python tests/reference/ner_seqeval_golden.py > tests/data/ner/seqeval_golden.txt

Format, one case after another:
    gold <TAB> sentences joined by " | ", tags by " "
    pred <TAB> the same shapes
    micro <TAB> precision recall f1 accuracy  (repr of the float64s)
    type <TAB> name <TAB> precision recall f1 support  (classification_report's rows, sorted)
    end
"""
import random
import warnings

from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities, precision_recall_fscore_support

warnings.simplefilter("ignore")
TYPES = ["PER", "LOC", "ORG", "MISC"]
PREFIXES = {"IOB2": "BI", "IOB1": "BI", "IOBES": "BIES", "BILOU": "BILU"}


def sentence(rng, scheme):
    tags = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.4:
            tags.append("O")
        else:
            tags.append(rng.choice(PREFIXES[scheme]) + "-" + rng.choice(TYPES))
    return tags


def mutate(rng, tags, scheme):
    out = list(tags)
    for i in range(len(out)):
        if rng.random() < 0.25:
            out[i] = "O" if rng.random() < 0.3 else rng.choice(PREFIXES[scheme]) + "-" + rng.choice(TYPES)
    return out


def main():
    rng = random.Random(49)
    for case in range(40):
        scheme = list(PREFIXES)[case % 4]
        gold = [sentence(rng, scheme) for _ in range(rng.randint(1, 5))]
        pred = [mutate(rng, s, scheme) for s in gold]
        print("gold\t" + " | ".join(" ".join(s) for s in gold))
        print("pred\t" + " | ".join(" ".join(s) for s in pred))
        print("micro\t%r %r %r %r" % (float(precision_score(gold, pred)), float(recall_score(gold, pred)),
                                      float(f1_score(gold, pred)), float(accuracy_score(gold, pred))))
        names = sorted({t for t, _, _ in get_entities(gold)} | {t for t, _, _ in get_entities(pred)})
        p, r, f, s = precision_recall_fscore_support(gold, pred, average=None)
        for i, name in enumerate(names):
            print("type\t%s\t%r %r %r %d" % (name, float(p[i]), float(r[i]), float(f[i]), int(s[i])))
        print("end")


if __name__ == "__main__":
    main()
