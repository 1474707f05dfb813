#!/usr/bin/env python3
"""Writes the hand-made SQuAD fixtures of tests/data/squad/ (developer tool; `make test` does
not run it). Answer offsets are computed here with str.find, in Python characters (code
points), so no offset is typed by hand. Every file is committed; re-running rewrites them
byte for byte.

usage: python3 tests/reference/squad_make_fixtures.py tests/data/squad
"""
import json
import os
import sys


def ans(context, text, nth=0, start=None):
    """An answer dict: `text` found (its nth occurrence) in context, or at `start`."""
    if start is None:
        start = -1
        for _ in range(nth + 1):
            start = context.find(text, start + 1)
        assert start >= 0, (text, context)
    return {"answer_start": start, "text": text}


def qa(qid, question, answers, **extra):
    d = {"id": qid, "question": question, "answers": answers}
    d.update(extra)
    return d


def edge_v1():
    p1 = "Caf\u00e9 society met in 1920\u202fat the \U0001F600 Grand H\u00f4tel, Paris."
    p2 = "  Alpha beta\tgamma\r\ndelta  epsilon\u00a0zeta\u3000eta  "
    p3 = " x"
    p4 = "Cafe\u0301 \U00020000 \U0001F468\u200d\U0001F469 the end"
    p5 = "The quick brown fox jumps over the lazy dog."
    return {"version": "1.1", "data": [
        {"title": "Edge_cases", "paragraphs": [
            {"context": p1, "qas": [
                qa("e1-start", "Where did society meet?", [ans(p1, "Caf\u00e9")]),
                qa("e2-end", "Which city?", [ans(p1, "Paris.")]),
                qa("e3-narrow-nbsp", "When?", [ans(p1, "1920\u202fat")]),
                qa("e4-after-emoji", "Which hotel?", [ans(p1, "Grand H\u00f4tel")]),
                qa("e5-partial-token", "Hotel and city?", [ans(p1, "H\u00f4tel, Paris")]),
            ]},
            {"context": p2, "qas": [
                qa("l1-leading-ws", "Leading whitespace in the answer?", [ans(p2, "  Alpha", start=0)]),
                qa("l2-tab", "Across a tab?", [ans(p2, "beta\tgamma")]),
                qa("l3-nbsp", "Across a no-break space?", [ans(p2, "epsilon\u00a0zeta")]),
                qa("l4-space-before", "Starting on the newline?", [ans(p2, "\ndelta")]),
                qa("l5-trailing-space", "Only a space?", [ans(p2, " ", start=len(p2) - 1)]),
                qa("l6-wrong-text", "Text not at its offset?", [ans(p2, "Omega", start=2)]),
                qa("l7-empty-at-0", "Empty answer at 0?", [ans(p2, "", start=0)]),
                qa("l8-empty-at-4", "Empty answer at 4?", [ans(p2, "", start=4)]),
                qa("l9-ideographic", "Across U+3000?", [ans(p2, "zeta\u3000eta")]),
            ]},
            {"context": p3, "qas": [
                qa("s1-slice-wraps", "A space and x?", [ans(p3, " x", start=0)]),
            ]},
        ]},
        {"title": "Second_article", "paragraphs": [
            {"context": p4, "qas": [
                qa("c1-zwj", "Which family?", [ans(p4, "\U0001F468\u200d\U0001F469")]),
                qa("c2-combining", "Which cafe?", [ans(p4, "Cafe\u0301")]),
                qa("c3-end", "How does it end?", [ans(p4, "the end")]),
            ]},
            {"context": p5, "qas": [
                qa("f1", "What jumps?", [ans(p5, "The quick brown fox")]),
                qa("f2", "Over what?", [ans(p5, "the lazy dog")]),
                qa("f3-multispace", "Over what, spaced?", [{"answer_start": p5.find("lazy"), "text": "lazy \ndog"}]),
            ]},
        ]},
    ]}


def edge_v2():
    p = "The Normans were in Normandy. They gave their name to it."
    q = "Empty questions are fine: \u00e9t\u00e9."
    return {"version": "v2.0", "data": [
        {"title": "Normans", "paragraphs": [
            {"context": p, "qas": [
                qa("n1", "Where were the Normans?", [ans(p, "Normandy")], is_impossible=False),
                qa("n2-impossible", "Where were the Saxons?", [],
                   plausible_answers=[ans(p, "Normandy")], is_impossible=True),
                qa("n3-impossible-with-answers", "Who gave no name?", [ans(p, "They")], is_impossible=True),
                qa("n5-end", "To what?", [ans(p, "it.")], is_impossible=False),
            ]},
            {"context": q, "qas": [
                qa("n6", "Which season?", [ans(q, "\u00e9t\u00e9.")], is_impossible=False),
                qa("n7-impossible", "Which winter?", [], is_impossible=True),
            ]},
        ]},
    ]}


def windows_v2():
    """Long paragraphs for the doc-span windows of convert_examples_to_features: answers at
    the first and last word, in the middle of several overlapping windows, across windows,
    inside a word split by WordPiece (the "(1895-1943)." case that _improve_answer_span
    narrows), a sub-word answer it cannot narrow ("Japan" in "Japanese"), an answer
    repeated in its own span, unknown-word tokens, words that tokenize to nothing, and
    impossible questions."""
    p1 = ("The leader was John Smith (1895-1943). He was born in a small village near the river, "
          "where his father kept a mill and his mother taught at the local school for many years. "
          "The Japanese electronics industry is the largest in the world, said a report in 1999. "
          "Later the mill burned down; the family moved to the city of Springfield, Illinois, "
          "and opened a bakery called Smith & Sons that sold bread, bread rolls and cakes.")
    p2 = ("Zzyzxq qwxvé unbelievably antidisestablishmentarianism and pneumonoultramicroscopic "
          "words make WordPiece split a lot: tokenization, reorganization, internationalization. "
          "Short \u200b end \u00ad.")
    return {"version": "v2.0", "data": [
        {"title": "Windows", "paragraphs": [
            {"context": p1, "qas": [
                qa("w1-first", "Who was the leader?", [ans(p1, "The leader")], is_impossible=False),
                qa("w2-improve", "What year was John Smith born?", [ans(p1, "1895")], is_impossible=False),
                qa("w3-subword", "What country is the top exporter of electronics?", [ans(p1, "Japan")],
                   is_impossible=False),
                qa("w4-middle", "What did his father keep?", [ans(p1, "a mill")], is_impossible=False),
                qa("w5-long", "Where did the family move, and what did they open there?",
                   [ans(p1, "the city of Springfield, Illinois, and opened a bakery")], is_impossible=False),
                qa("w6-last", "What else did the bakery sell besides bread and bread rolls, a question "
                   "whose many words are cut at max_query_length?", [ans(p1, "cakes.")], is_impossible=False),
                qa("w7-repeat", "What did they sell?", [ans(p1, "bread", nth=1)], is_impossible=False),
                qa("w8-impossible", "When did the bakery close?", [],
                   plausible_answers=[ans(p1, "1999")], is_impossible=True),
            ]},
            {"context": p2, "qas": [
                qa("w9-unk", "Which words?", [ans(p2, "qwxvé unbelievably")], is_impossible=False),
                qa("w10-split", "What does WordPiece split?", [ans(p2, "internationalization.")],
                   is_impossible=False),
                qa("w11-impossible", "Why?", [], is_impossible=True),
                # U+200B and U+00AD are words of the context (not split on) that tokenize
                # to nothing: an answer starting on one, and answers that are only one.
                qa("w12-zero-width-start", "How does it end?", [ans(p2, "\u200b end")], is_impossible=False),
                qa("w13-zero-width-only", "What is invisible?", [ans(p2, "\u200b")], is_impossible=False),
                qa("w14-soft-hyphen-last", "What is last?", [ans(p2, "\u00ad.")], is_impossible=False),
            ]},
        ]},
    ]}


def windows_v1():
    """windows_v2 as SQuAD 1.1: the possible questions only, without is_impossible."""
    data = windows_v2()
    data["version"] = "1.1"
    for para in data["data"][0]["paragraphs"]:
        para["qas"] = [dict((k, v) for k, v in q.items() if k != "is_impossible")
                       for q in para["qas"] if not q["is_impossible"]]
    return data


def one_question(context, answers, **extra):
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [qa("q-bad", "Why?", answers, **extra)]}]}]}


# ---- evaluation fixtures: (id, gold answer texts, prediction or None) per question ----

EVAL_V1 = [
    ("v1-exact", ["Denver Broncos", "Denver Broncos", "Denver Broncos"], "Denver Broncos"),
    ("v1-norm", ["The Denver Broncos!"], "denver   broncos"),
    ("v1-partial", ["Santa Clara, California", "Levi's Stadium"], "Levi's Stadium in Santa Clara"),
    ("v1-articles", ["a cat"], "the cat"),
    ("v1-only-articles", ["the"], "A."),
    ("v1-empty-pred", ["gold"], ""),
    ("v1-unicode-case", ["\u00c9cole Normale"], "\u00e9cole normale"),
    ("v1-final-sigma", ["\u039f\u0394\u039f\u03a3"], "\u03bf\u03b4\u03bf\u03c3"),
    ("v1-dotted-i", ["\u0130stanbul"], "istanbul"),
    ("v1-unicode-punct", ["\u00abhello\u00bb world"], "hello world"),
    ("v1-em-dash", ["a\u2014b"], "b"),
    ("v1-accent-article", ["\u00e9a the"], "\u00e9a"),
    ("v1-digit-article", ["the1"], "1"),
    ("v1-underscore", ["the_end"], "theend"),
    ("v1-nbsp", ["new york"], "new\u00a0york"),
    ("v1-dup-tokens", ["cat cat dog"], "cat cat cat"),
    ("v1-three-gold", ["one two three four", "two three", "five"], "one two three five six"),
    ("v1-missing", ["anything"], None),
    ("v1-exact", ["Denver Broncos"], "Denver Broncos"),          # the same id again: counted twice
]

# (id, gold texts ([] = no answer), prediction or None, na_prob)
EVAL_V2 = [
    ("h01", ["Denver Broncos"], "Denver Broncos", 0.1),
    ("h02", ["Santa Clara, California", "Levi's Stadium"], "Levi's Stadium in Santa Clara", 0.5),
    ("h03", ["the Carolina Panthers", "Panthers"], "Carolina", 0.5),
    ("h04", ["The", "a.", "gold medal"], "the gold", 0.25),          # "The", "a." normalize to "": dropped
    ("h05", ["The", "an"], "", 0.75),                                 # every gold empty: [""]; pred "" scores 1
    ("n01", [], "", 0.9),
    ("n02", [], "Broncos", 0.5),
    ("n03", [], "the", 1),                                            # normalizes to "": exact and F1 1 (ints)
    ("h06", ["seven words in this rather long answer"], "words in this answer and more", 0),
    ("h07", ["\u00c9cole Normale Sup\u00e9rieure"], "l'\u00e9cole normale", 1e-05),
    ("h08", ["one two three"], "two three four five six seven", 0.3),
    ("h09", ["alpha beta gamma delta"], "beta gamma", 0.3),
    ("h10", ["a b c d e f g"], "b c d e f g h i j", 0.7),
    ("n04", [], "x", -3.25),
    ("h11", ["the quick brown fox"], "quick brown foxes", 7.5),
    ("h12", ["red green blue"], "green", 0.3),
    ("h13", ["one two three four five six seven"], "three", 0.65),
    ("h14", ["sun moon"], "moon stars planets", 0.2),
    ("h15", ["x y z"], "x y", 0.5),
    ("h16", ["north south east west"], "south east", 0.45),
    ("n05", [], "", 0.05),
    ("h17", ["Denver Broncos"], "Broncos", 0.5),
    ("h18", ["p q r s t u"], "q r s", 0.35),
    ("h19", ["apple banana cherry"], "banana cherry date elderberry fig", 0.6),
    ("h20", ["one"], "one two three four five six seven eight nine ten eleven", 0.15),
    ("h21", ["long answer with many words in it here"], "many words", 0.85),
    ("h22", ["ab cd ef gh"], "cd ef gh ij kl", 0.95),
    ("h23", ["mm nn oo"], "nn", 0.55),
    ("h02", ["Santa Clara, California", "Levi's Stadium"], "Levi's Stadium in Santa Clara", 0.5),  # again
]


def eval_data(version, rows):
    qas = [{"id": r[0], "question": "Q %s?" % r[0], "answers": [{"answer_start": 0, "text": t} for t in r[1]]}
           for r in rows]
    half = len(qas) // 2
    return {"version": version, "data": [{"title": "Eval", "paragraphs": [
        {"context": "Context one.", "qas": qas[:half]}, {"context": "Context two.", "qas": qas[half:]}]}]}


def preds(rows, drop=(), extra=True, **override):
    d = {r[0]: r[2] for r in rows if r[2] is not None and r[0] not in drop}
    d.update(override)
    if extra:
        d["not-in-data"] = "an extra prediction is ignored"
    return d


def na_probs(rows, drop=(), **override):
    d = {}
    for r in rows:
        if r[0] not in drop:
            d[r[0]] = r[3]
    d.update(override)
    d["not-in-data"] = 0.5
    return d


def main():
    out = sys.argv[1]
    files = {
        "edge_v1.json": (edge_v1(), False),
        "edge_v1_escaped.json": (edge_v1(), True),
        "edge_v2.json": (edge_v2(), False),
        "windows_v1.json": (windows_v1(), False),
        "windows_v2.json": (windows_v2(), False),
        "err_two_answers.json": (one_question("One two three.", [
            {"answer_start": 0, "text": "One"}, {"answer_start": 4, "text": "two"}]), False),
        "err_offset_past_end.json": (one_question("One two.", [{"answer_start": 8, "text": "x"}]), False),
        "err_answer_past_end.json": (one_question("One two.", [{"answer_start": 4, "text": "two.."}]), False),
        "err_v2_no_is_impossible.json": (one_question("One two.", [{"answer_start": 4, "text": "two"}]), False),
        # len(qa["answers"]) is read before is_impossible is looked at: a KeyError in training.
        "err_v2_impossible_no_answers.json": ({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
            {"context": "One two.", "qas": [{"id": "q-bad", "question": "Why?", "is_impossible": True}]}]}]},
            False),
    }
    files.update({
        "eval_v1.json": (eval_data("1.1", EVAL_V1), False),
        "eval_v1_version_1_0.json": (eval_data("1.0", EVAL_V1[:3]), False),
        "eval_v1_preds.json": (preds(EVAL_V1), False),
        "eval_v1_preds_not_string.json": (preds(EVAL_V1, **{"v1-norm": ["denver"]}), False),
        "eval_v2.json": (eval_data("v2.0", EVAL_V2), False),
        "eval_v2_preds.json": (preds(EVAL_V2), False),
        "eval_v2_na.json": (na_probs(EVAL_V2), False),
        "eval_v2_preds_missing.json": (preds(EVAL_V2, drop=("h03", "n02")), False),
        "eval_v2_preds_not_string.json": (preds(EVAL_V2, h03=42), False),
        "eval_v2_na_int.json": ({r[0]: int(round(r[3] * 10)) for r in EVAL_V2}, False),
        "eval_v2_na_missing.json": (na_probs(EVAL_V2, drop=("h08",)), False),
        "eval_v2_na_not_number.json": (na_probs(EVAL_V2, h08="0.3"), False),
    })
    for name, (data, ascii_only) in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8", newline="\n") as f:
            json.dump(data, f, ensure_ascii=ascii_only, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
