"""Made-up text of two domains, and a tiny "pretrained" ZEN 2.0 built from it in a temporary folder, for the
n-gram bag and adaptation tests (no real corpus read, nothing downloaded).

The news domain has its own multi-character words; the review domain has others (the n-grams adaptation
should find) and labels a review 1 iff it holds a positive word.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch

from tests.conftest import write

NEWS_WORDS = ["北京", "上海", "经济", "发展", "会议", "政府", "改革", "人民", "国家", "市场", "工作", "建设"]
POSITIVE = ["好评如潮", "物美价廉", "非常满意"]
NEGATIVE = ["质量太差", "服务恶劣", "很不满意"]
REVIEW_WORDS = ["房间", "酒店", "前台", "早餐", "价格", "快递", "屏幕", "电池"]
FILLER = list("的了是在我有他这个们中来上大为和到地说时要就出会可也你对生能而子那得于着下自之年过发后作里")

TINY_SETS = ["model.hidden_size=16", "model.num_hidden_layers=1", "model.num_attention_heads=2",
             "model.intermediate_size=32", "model.num_hidden_word_layers=1", "task.max_seq_len=32",
             "task.eval_batch_size=16", "train.dtype=fp32", "train.device=cpu", "train.tensorboard=false",
             "train.log_every=100", "train.num_threads=1", "train.batch_size=8", "train.lr=3e-3",
             "train.save_every=0"]


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    return "".join(rng.choice(words) + "".join(rng.choice(FILLER) for _ in range(rng.randint(0, 2)))
                   for _ in range(n))


def news(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [sentence(rng, NEWS_WORDS, rng.randint(3, 8)) for _ in range(n)]


def reviews(n: int, seed: int) -> list[str]:
    """label<TAB>text lines: 1 iff the review holds a positive word."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        positive = rng.random() < 0.5
        text = sentence(rng, REVIEW_WORDS, rng.randint(2, 5))
        k = rng.randint(0, len(text))
        text = text[:k] + rng.choice(POSITIVE if positive else NEGATIVE) + text[k:]
        out.append(f"{int(positive)}\t{text}")
    return out


def pretrained_model(tmp: Path) -> Path:
    """A tiny ZEN 2.0 pretraining model directory (random weights) whose vocabulary covers both domains and
    whose lexicon holds the news words only."""
    from zencli.lexicon.extract import build
    from zencli.lexicon.ngram_file import Lexicon
    from zencli.lexicon.settings import LexiconConfig
    from zencli.model.checkpoint import save_zen_model
    from zencli.model.config import ZenConfig
    from zencli.model.pretraining import ZenForPreTraining
    from zencli.text.vocab_build import build_vocab

    corpus = write(tmp / "news.txt", news(400, 0))
    every_char = write(tmp / "chars.txt", ["".join(POSITIVE + NEGATIVE + REVIEW_WORDS + NEWS_WORDS + FILLER)])
    vocab = tmp / "vocab.txt"
    build_vocab([corpus, every_char]).vocab.save(vocab)
    ngram = tmp / "ngram.txt"
    build(LexiconConfig(corpus=[corpus], output=ngram, vocab=vocab, min_freq=5, workers=1))
    n_ngrams = len(Lexicon.load(ngram))
    vocab_rows = sum(1 for line in vocab.read_text(encoding="utf-8").splitlines() if line)
    torch.manual_seed(0)
    model = ZenForPreTraining(ZenConfig(vocab_size=vocab_rows, hidden_size=16, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=32, word_size=n_ngrams + 1,
                                        num_hidden_word_layers=1, encoder="zen2"))
    return save_zen_model(model, tmp / "pretrained", vocab=vocab, ngram=ngram)


def review_files(tmp: Path, n_train: int = 200) -> tuple[Path, Path]:
    return write(tmp / "train.tsv", reviews(n_train, 1)), write(tmp / "dev.tsv", reviews(60, 2))
