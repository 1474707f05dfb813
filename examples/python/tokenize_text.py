"""est.Tokenizer in the shape of HuggingFace tokenizers (docs/python.md §3).

    python examples/python/tokenize_text.py [tokenizer.json | vocab.txt]"""
import os
import sys

import est

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                           "tests", "data", "vocab_uncased.txt")
tok = est.Tokenizer.from_file(path)

# %% one text, one pair: ids, tokens, character offsets, type ids, masks
enc = tok.encode("Hello, y'all! How are you?")
print(enc.tokens)
print(enc.ids)
print(enc.offsets)
pair = tok.encode("What is est?", pair="A BERT in plain C.")
print(list(zip(pair.tokens, pair.type_ids)))

# %% a batch, spread over threads with the GIL released
batch = tok.encode_batch(["first sentence", ("a question?", "an answer."), "third"] * 1000, threads=2)
print(len(batch), batch[1].tokens)
print(tok.decode(enc.ids))
