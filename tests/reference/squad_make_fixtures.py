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


def one_question(context, answers, **extra):
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [qa("q-bad", "Why?", answers, **extra)]}]}]}


def main():
    out = sys.argv[1]
    files = {
        "edge_v1.json": (edge_v1(), False),
        "edge_v1_escaped.json": (edge_v1(), True),
        "edge_v2.json": (edge_v2(), False),
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
    for name, (data, ascii_only) in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8", newline="\n") as f:
            json.dump(data, f, ensure_ascii=ascii_only, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
