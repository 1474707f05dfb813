"""Fine-tune a classifier from Python with est.run_classifier, then predict with est.Classifier
(docs/python.md §5, §6).

    python examples/python/classify.py [DATA_DIR VOCAB BERT_CONFIG [INIT_CHECKPOINT]]

Without arguments it trains the 1-layer BERT of tests/data on the bundled MRPC sample in a few
seconds: the flags are `est run_classifier`'s (docs/commands.md), the metrics come back as a dict,
the log goes through Python's logging."""
import logging
import os
import sys
import tempfile

import est

logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")
args = sys.argv[1:] or [os.path.join(data, "glue_mini", "MRPC"), os.path.join(data, "vocab_uncased.txt"),
                        os.path.join(data, "run_classifier", "bert_config_h32.json")]
out = os.path.join(tempfile.mkdtemp(), "mrpc")

# %% train, evaluate and export: est run_classifier's flags as keywords
results = est.run_classifier(
    task_name="mrpc", do_train=True, do_eval=True, do_export=True, data_dir=args[0], vocab_file=args[1],
    bert_config_file=args[2], init_checkpoint=args[3] if len(args) > 3 else None, output_dir=out,
    max_seq_length=32, train_batch_size=2, num_train_epochs=1, learning_rate=1e-3)
print("eval:", results)

# %% the export answers texts and pairs: probabilities in the order of .labels
clf = est.Classifier(os.path.join(out, "export"))
print(clf.labels)
print(clf.predict([("He said the food was good.", "The food was good, he said."),
                   ("It rained.", "The market closed higher.")]))
