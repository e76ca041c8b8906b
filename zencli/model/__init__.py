"""ZEN encoders, one concept per file.

config.py (ZenConfig) · embeddings.py (char and n-gram inputs) · attention.py (plain self-attention) ·
relative_attention.py (ZEN 2.0 relative positions) · layer.py (Transformer layer) · ngram_fusion.py
(the slot→char matrix P and h + P·g) · encoder.py (ZenModel: ZEN 2.0 / ZEN 1.0 / plain BERT) ·
pretraining.py (MLM + NSP heads) · checkpoint.py (zen's model directory) · released.py (released ZEN
and BERT checkpoints) · heads.py, crf.py (task heads) · chte.py (CHTE).
"""
