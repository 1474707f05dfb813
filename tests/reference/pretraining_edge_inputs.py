"""Writes the edge-case inputs of tests/data/pretraining/ (edge_1.txt, edge_2.txt,
tiny_vocab.txt, tiny_docs.txt); their expected records come from the unchanged
create_pretraining_data.py (commands in tests/data/README.md).

Run: python3 tests/reference/pretraining_edge_inputs.py tests/data/pretraining
"""
import os
import random
import sys


def main(out):
    rng = random.Random(16)
    words = ("the cat sat on a mat while unaffable dogs were running through "
             "the woods and nobody noticed anything strange about it").split()

    def sentence(n):
        return " ".join(rng.choice(words) for _ in range(n))

    f1 = [
        # doc 1: CRLF endings, an interior CR (tf.gfile drops it: "foo\rbar" is one word),
        # a line with no tokens in the middle (zero-width space, soft hyphen), padding.
        "The first sentence, of the first document.\r\n",
        "foo\rbar is one word for tf.gfile\r\n",
        "\u200b\u00ad\n",
        "   " + sentence(7) + " \t\n",
        # a blank line of Python whitespace only (NBSP, tab): a document boundary
        "\u00a0 \t\n",
        # doc 2: one sentence
        "Only one sentence here.\n",
        "\n",
        # doc 3: a sentence far longer than max_seq_length, then a short one
        sentence(100) + "\n",
        "Short.\n",
        "\n", "\n",
        # doc 4: many short sentences
    ] + [sentence(rng.randint(1, 6)) + "\n" for _ in range(10)] + [
        # no blank line at the end of the file: the document goes on in edge_2.txt
        "Last line of the first file.\n",
    ]
    f2 = ["First line of the second file.\n", sentence(5) + "\n", "\n", "\n",
          "Another lone sentence.\n", "\n", sentence(9) + "\n", sentence(3) + "\n",
          "no final newline"]
    with open(os.path.join(out, "edge_1.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("".join(f1))
    with open(os.path.join(out, "edge_2.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("".join(f2))

    # A tiny vocab whose words split into many "##" pieces, with "the" twice: the dict keeps
    # the first line's place in list(vocab.keys()) and the last line's id, so every key after
    # the second "the" sits one place before its id.
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", ".", ","]
    vocab += list(letters) + ["the"] + ["##" + c for c in letters] + ["un", "##aff", "##able"]
    with open(os.path.join(out, "tiny_vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    docs = []
    for _ in range(12):
        docs.append("\n".join(sentence(rng.randint(2, 8)) + "." for _ in range(rng.randint(1, 5))))
    with open(os.path.join(out, "tiny_docs.txt"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(docs) + "\n")


main(sys.argv[1])
