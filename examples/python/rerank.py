"""Rerank documents for a query with est.CrossEncoder, as sentence-transformers' CrossEncoder
.rank (docs/python.md §5).

    python examples/python/rerank.py [EXPORT]

EXPORT: a classifier of (query, document) pairs exported by `est run_classifier --do_export`.
Without one, this trains a tiny one here on the bundled MRPC sample (paraphrase or not: the
score is the probability that the two texts say the same), so the script runs anywhere."""
import os
import sys
import tempfile

import est

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
if len(sys.argv) > 1:
    export = sys.argv[1]
else:
    out = os.path.join(tempfile.mkdtemp(), "mrpc")
    data = os.path.join(root, "tests", "data")
    est.run_classifier(task_name="mrpc", do_train=True, do_export=True, data_dir=os.path.join(data, "glue_mini", "MRPC"),
                       vocab_file=os.path.join(data, "vocab_uncased.txt"),
                       bert_config_file=os.path.join(data, "run_classifier", "bert_config_h32.json"),
                       output_dir=out, max_seq_length=32, train_batch_size=2, num_train_epochs=1)
    export = os.path.join(out, "export")

# %% one score per (query, document) pair; rank sorts them, best first
reranker = est.CrossEncoder(export)
query = "The company's shares rose after the report."
documents = [
    "Shares of the company climbed following the report.",
    "The weather was cold and wet all week.",
    "After the report, the firm's stock went up.",
    "He bought a new bicycle.",
]
print(reranker.predict([(query, d) for d in documents]))
for hit in reranker.rank(query, documents, top_k=3, return_documents=True):
    print(f"{hit['score']:.4f}  [{hit['corpus_id']}] {hit['text']}")
