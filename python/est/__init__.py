"""est from Python (docs/python.md): est's tokenizers, sentence embeddings, classifiers,
question answering, TFRecords, Examples and checkpoints in-process, over libest.so."""
from ._lib import (AbortedError, CancelledError, DataLossError, EstError, FailedPreconditionError, InternalError,
                   InvalidArgumentError, NotFoundError, OutOfRangeError, ResourceExhaustedError, UnimplementedError)
from ._lib import IOError_ as IOError
from . import checkpoint
from .data import TFRecordReader, TFRecordWriter, parse_example, serialize_example
from .models import Classifier, CrossEncoder, QuestionAnswerer, SentenceEncoder
from .tasks import run_classifier, run_ner, run_pretraining, run_squad
from .tokenizer import Encoding, Tokenizer

__version__ = "0.1.0"
library_path = _lib.path
