#!/usr/bin/env python3
"""normalize_answer of the official evaluate-v2.0.py on random strings (developer tool; `make
test` does not run it). The script is imported from its path, unchanged (it needs numpy), and
its own normalize_answer is called; v1.1's is the same function but for re.UNICODE, which
Python 3 sets anyway. One JSON line per case: [input, normalized]. The strings mix the
articles, ASCII punctuation, Unicode punctuation, letters that lower-case specially (İ, Σ, Ａ,
ǅ), digits of other scripts, combining marks, and Python whitespace of every kind.

usage: PYTHON tests/reference/squad_normalize_reference.py EVALUATE_V2_0 > tests/data/squad/normalize_golden.jsonl
"""
import importlib.util
import json
import random
import sys

POOL = (["a", "an", "the", "The", "A", "AN", "THE", "x", "cat", "é", "É", "İ", "ΟΔΟΣ", "Σ", "σ", "Ａ", "ǅ", "ß",
         "١٢", "٣", "Ⅻ", "½", "_", "1", "e\u0301", "\u0301", "\u200d", "中", "한"]
        + list("!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~") + ["«", "»", "—", "’", "¿", "·"]
        + [" ", "  ", "\t", "\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\u00a0", "\u1680", "\u2002", "\u2028",
           "\u202f", "\u3000", "\u200b", "\ufeff"])


def main():
    spec = importlib.util.spec_from_file_location("evaluate_v2", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = random.Random(2024)
    for _ in range(2000):
        s = "".join(rng.choice(POOL) for _ in range(rng.randint(0, 10)))
        print(json.dumps([s, module.normalize_answer(s)]))


if __name__ == "__main__":
    main()
