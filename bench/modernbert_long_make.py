"""A random ModernBERT-base-shaped directory (hidden 768, 22 layers, 12 heads, intermediate
1152, 8192 positions; a 40-token WordPiece vocab, as the tests' tiny models) for
bench/README.md's "Long inputs": /tmp/venv-modern/bin/python bench/modernbert_long_make.py DIR
(transformers 4.48.3, torch 2.4.1: tests/reference/modernbert_golden.py's venv)."""
import sys
import torch
from transformers import ModernBertConfig, ModernBertModel
torch.manual_seed(0)
cfg = ModernBertConfig(vocab_size=40, hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
                       max_position_embeddings=8192, pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3,
                       reference_compile=False)
m = ModernBertModel(cfg)
m.save_pretrained(sys.argv[1], safe_serialization=True)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") + ["the", "movie", "good", "bad", "##s", "##ing", "##ed", "not", "fun"]
open(sys.argv[1] + "/vocab.txt", "w").write("".join(t + "\n" for t in VOCAB))
