"""Subword tokenizers of pretrained encoders beyond BERT's WordPiece, in the Transform graph with ops TF Serving
2.16 links: XLM-RoBERTa's sentencepiece model (sentencepiece) and RoBERTa's byte-level BPE (byte_bpe), their
files read and checked (files), the special tokens and the sequence's frame they share (frame), and the
Transform's assets and the dispatch by the tokenization's kind (assets)."""
