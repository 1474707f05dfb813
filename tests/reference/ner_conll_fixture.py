"""Writes tests/data/ner/conll/train.txt and dev.txt (test.txt is a copy of dev.txt): made-up
sentences of fill words and PER / LOC / ORG names in IOB2, CoNLL-2003's four columns, every
sixth (train) or third (dev) sentence long enough to need windows at max_seq_length 16.
tests/test_run_ner.c trains on them. No dependency but Python 3:

    python3 tests/reference/ner_conll_fixture.py && cp tests/data/ner/conll/dev.txt tests/data/ner/conll/test.txt
"""
import random

rng = random.Random(49)
PER = [["john"], ["mary", "smith"], ["peter", "blackburn"], ["anna"], ["werner", "zwingmann"]]
LOC = [["paris"], ["london"], ["new", "york"], ["berlin"], ["brussels"]]
ORG = [["reuters"], ["united", "nations"], ["fifa"], ["microsoft"]]
FILL = ["said", "in", "on", "visited", "today", "and", "met", "with", "from", "to", "the", "a", "report", "."]


def sentence(n_ent):
    words, tags = [], []
    for _ in range(n_ent):
        for _ in range(rng.randint(0, 3)):
            words.append(rng.choice(FILL))
            tags.append("O")
        kind = rng.choice(["PER", "LOC", "ORG"])
        ent = rng.choice({"PER": PER, "LOC": LOC, "ORG": ORG}[kind])
        for i, w in enumerate(ent):
            words.append(w.capitalize())
            tags.append(("B-" if i == 0 else "I-") + kind)
    words.append(".")
    tags.append("O")
    return words, tags


def write(path, n, long_every):
    with open(path, "w") as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        for i in range(n):
            w, t = sentence(8 if long_every and i % long_every == 0 else rng.randint(1, 3))
            for a, b in zip(w, t):
                f.write("%s NN O %s\n" % (a, b))
            f.write("\n")


write("tests/data/ner/conll/train.txt", 48, 6)
write("tests/data/ner/conll/dev.txt", 8, 3)
