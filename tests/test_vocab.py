"""vocab.txt I/O, special tokens, and `zen vocab build` (zh characters, ar WordPiece)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import write
from zencli.cli.vocab import app
from zencli.errors import ZenError
from zencli.text.tokenizer import Tokenizer
from zencli.text.vocab import SPECIAL_TOKENS, Vocab, read_sidecar, sidecar_path
from zencli.text.vocab_build import build_vocab

runner = CliRunner()


# --- vocab.txt ----------------------------------------------------------------------------------------


def test_round_trip_keeps_exact_strings(tmp_path: Path):
    tokens = [*SPECIAL_TOKENS, "中", "##ａ", " lead", "trail ", "a b", "[unused1]", "Ω", "##"]
    v = Vocab(tokens)
    p = tmp_path / "vocab.txt"
    v.save(p)
    assert p.read_bytes() == ("\n".join(tokens) + "\n").encode("utf-8")
    w = Vocab.load(p)
    assert w == v and w.tokens == tokens and len(w) == len(tokens)
    assert w.token_to_id(" lead") == 7 and w.id_to_token(8) == "trail "
    w.save(tmp_path / "again.txt")
    assert (tmp_path / "again.txt").read_bytes() == p.read_bytes()


def test_bert_chinese_layout_specials_by_name(tmp_path: Path):
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]", "[MASK]", "的"]
    v = Vocab.load(write(tmp_path / "vocab.txt", "\n".join(tokens) + "\n"))
    assert (v.pad_id, v.unk_id, v.cls_id, v.sep_id, v.mask_id) == (0, 100, 101, 102, 103)
    assert v.token_to_id("的") == 104 and v.token_to_id("没有") == 100


def test_crlf_vocab_and_missing_final_newline(tmp_path: Path):
    p = tmp_path / "vocab.txt"
    p.write_bytes(b"[PAD]\r\n[UNK]\r\nx")
    assert Vocab.load(p).tokens == ["[PAD]", "[UNK]", "x"]


def test_duplicate_token_names_both_lines(tmp_path: Path):
    p = write(tmp_path / "vocab.txt", "[PAD]\n[UNK]\na\nb\na\n")
    with pytest.raises(ZenError) as e:
        Vocab.load(p)
    assert f"{p}:5" in str(e.value) and "line 3" in str(e.value) and "'a'" in str(e.value)


def test_empty_line_is_an_error(tmp_path: Path):
    p = write(tmp_path / "vocab.txt", "[PAD]\n[UNK]\n\nb\n")
    with pytest.raises(ZenError, match=rf"{p}:3: empty line"):
        Vocab.load(p)
    q = write(tmp_path / "trailing.txt", "[PAD]\n[UNK]\n\n")
    with pytest.raises(ZenError, match=rf"{q}:3: empty line"):
        Vocab.load(q)


def test_bad_files_come_from_iter_lines(tmp_path: Path):
    with pytest.raises(ZenError, match="no such file"):
        Vocab.load(tmp_path / "missing.txt")
    with pytest.raises(ZenError, match="empty"):
        Vocab.load(write(tmp_path / "empty.txt", ""))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"[PAD]\n\xff\n")
    with pytest.raises(ZenError, match=rf"{bad}:2: invalid UTF-8"):
        Vocab.load(bad)


def test_missing_special_is_a_clear_error_only_when_needed(tmp_path: Path):
    v = Vocab.load(write(tmp_path / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nx\n"))
    assert v.token_to_id("x") == 4 and v.token_to_id("y") == 1
    with pytest.raises(ZenError, match=r"vocab.txt: vocabulary has no \[MASK\] token"):
        _ = v.mask_id
    no_unk = Vocab(["[PAD]", "x"])
    assert no_unk.token_to_id("x") == 1
    with pytest.raises(ZenError, match=r"no \[UNK\]"):
        no_unk.token_to_id("y")


def test_in_memory_vocab_validation():
    with pytest.raises(ZenError, match="duplicates id 0"):
        Vocab(["a", "b", "a"])
    with pytest.raises(ZenError, match="empty"):
        Vocab(["a", ""])
    with pytest.raises(ZenError, match="line break"):
        Vocab(["a", "b\nc"])
    with pytest.raises(ZenError, match="out of range"):
        Vocab(["a"]).id_to_token(1)


def test_sidecar_settings_reach_the_tokenizer(tmp_path: Path):
    p = write(tmp_path / "vocab.txt", "\n".join([*SPECIAL_TOKENS, "é", "e"]) + "\n")
    assert read_sidecar(p) is None
    assert Tokenizer.from_vocab(p).tokens("É") == ["e"]  # BERT default: lower-case + strip accents
    write(sidecar_path(p), json.dumps({"format": "zen-vocab", "lowercase": True, "strip_accents": False}))
    assert Tokenizer.from_vocab(p).tokens("É") == ["é"]
    assert Tokenizer.from_vocab(p, strip_accents=True).tokens("É") == ["e"]
    assert Tokenizer.from_vocab(Vocab.load(p)).tokens("É") == ["é"]
    write(sidecar_path(p), json.dumps({"model_type": "gpt2"}))  # someone else's vocab.json: ignored
    assert read_sidecar(p) is None
    write(sidecar_path(p), "{not json")
    with pytest.raises(ZenError, match=r"vocab.json: not valid UTF-8 JSON"):
        Tokenizer.from_vocab(p)


# --- zen vocab build: zh ------------------------------------------------------------------------------


def test_build_zh_order_and_min_freq(tmp_path: Path):
    corpus = write(tmp_path / "c.txt", "乙甲乙，丙\n甲乙 Ab\n\nab丁，\n")
    b = build_vocab([corpus])
    # counts: 乙 3, 甲 2, ， 2, a 2, ##b 2, 丙 1, 丁 1 (ties by string)
    assert b.vocab.tokens == [*SPECIAL_TOKENS, "乙", "##b", "a", "甲", "，", "丁", "丙"]
    assert b.info["corpus_lines"] == 4 and b.info["corpus_chars"] == 14 and b.info["corpus_tokens"] == 13
    assert b.info["coverage"] == 1.0
    b2 = build_vocab([corpus], min_freq=2)
    assert b2.vocab.tokens == [*SPECIAL_TOKENS, "乙", "##b", "a", "甲", "，"]
    assert b2.info["unk_tokens"] == 2 and b2.info["coverage"] == pytest.approx(11 / 13)
    assert build_vocab([corpus], size=7).vocab.tokens == [*SPECIAL_TOKENS, "乙", "##b"]
    cased = build_vocab([corpus], lowercase=False).vocab.tokens
    assert "A" in cased and "a" in cased and "##b" in cased
    with pytest.raises(ZenError, match="min-freq 9"):
        build_vocab([corpus], min_freq=9)


def test_build_zh_skips_unk_marker_and_errors_on_empty_corpus(tmp_path: Path):
    corpus = write(tmp_path / "c.txt", "x" * 150 + " 中\n")
    assert build_vocab([corpus]).vocab.tokens == [*SPECIAL_TOKENS, "中"]
    blank = write(tmp_path / "blank.txt", "  \n\t\n")
    with pytest.raises(ZenError, match="no tokens"):
        build_vocab([blank])


def test_cli_build_zh_writes_vocab_and_sidecar(tmp_path: Path):
    c1 = write(tmp_path / "a.txt", "中文中文\n")
    c2 = write(tmp_path / "b.txt", "文字！\n")
    out = tmp_path / "out" / "vocab.txt"
    res = runner.invoke(app, ["build", str(c1), str(c2), "-o", str(out), "--min-freq", "2"])
    assert res.exit_code == 0, res.output
    assert out.read_text(encoding="utf-8").splitlines() == [*SPECIAL_TOKENS, "文", "中"]
    side = json.loads((tmp_path / "out" / "vocab.json").read_text(encoding="utf-8"))
    assert side["format"] == "zen-vocab" and side["language"] == "zh" and side["min_freq"] == 2
    assert side["corpus_chars"] == 7 and side["corpus_tokens"] == 7 and side["vocab_size"] == 7
    assert side["corpus"] == [str(c1), str(c2)]
    assert "vocabulary size" in res.output and "coverage" in res.output
    res = runner.invoke(app, ["build", str(c1), "-o", str(out), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["vocab_size"] == 7
    res = runner.invoke(app, ["info", str(out)])
    assert res.exit_code == 0 and "[MASK]" in res.output and "cjk chars" in res.output
    res = runner.invoke(app, ["tokenize", str(out), "中文字", "--json"])
    assert [json.loads(x)["token"] for x in res.output.splitlines()] == ["中", "文", "[UNK]"]


def test_cli_build_errors(tmp_path: Path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes("中\n".encode() + b"\xfe\n")
    res = runner.invoke(app, ["build", str(bad), "-o", str(tmp_path / "v.txt")])
    assert isinstance(res.exception, ZenError) and f"{bad}:2: invalid UTF-8" in str(res.exception)
    good = write(tmp_path / "good.txt", "中\n")
    res = runner.invoke(app, ["build", str(good), "-o", str(good)])
    assert isinstance(res.exception, ZenError) and "also a corpus file" in str(res.exception)
    assert good.read_text(encoding="utf-8") == "中\n"
    res = runner.invoke(app, ["build", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "v.txt")])
    assert isinstance(res.exception, ZenError) and "no such file" in str(res.exception)
    res = runner.invoke(app, ["build", str(good), "-o", str(tmp_path / "v.txt"), "--language", "xx"])
    assert res.exit_code == 2  # usage error from the CLI parser


# --- zen vocab build: ar (WordPiece) ------------------------------------------------------------------

# Made-up "words" from Arabic letters with and without diacritics (not real text), plus some Latin.
_AR_WORDS = ["كَتَبَ", "كاتب", "مكتب", "مكتبة", "يكتب", "سلم", "سالم", "مسلم", "سلام", "قلم", "أقلام", "book", "books"]


def _ar_corpus(tmp_path: Path) -> Path:
    lines = [" ".join(_AR_WORDS[(i * 7 + k) % len(_AR_WORDS)] for k in range(1 + i % 5)) + "،" for i in range(60)]
    return write(tmp_path / "ar.txt", "\n".join(lines) + "\n")


def test_build_wordpiece_arabic(tmp_path: Path):
    corpus = _ar_corpus(tmp_path)
    b = build_vocab([corpus], language="ar", size=120)
    tokens = b.vocab.tokens
    assert tokens[:5] == list(SPECIAL_TOKENS) and len(tokens) <= 120
    assert "##\u064e" in tokens and "،" in tokens  # diacritics kept; punctuation is its own token
    assert any(t.startswith("##") and len(t) > 3 for t in tokens)  # real merges, not just characters
    assert b.info["strip_accents"] is False and b.info["method"] == "wordpiece" and b.info["coverage"] == 1.0
    tok = Tokenizer(b.vocab, strip_accents=False)
    for w in _AR_WORDS:
        pieces = tok.tokenize(w)
        assert "[UNK]" not in [t.text for t in pieces]
        assert "".join(t.text.removeprefix("##") for t in pieces) == w.lower()
        assert [(t.start, t.end) for t in pieces][0][0] == 0 and pieces[-1].end == len(w)
    # Deterministic (the tokenizers trainer alone is not: huggingface/tokenizers#1794).
    assert all(build_vocab([corpus], language="ar", size=120).vocab == b.vocab for _ in range(3))


def test_cli_build_arabic_sidecar_drives_tokenizer(tmp_path: Path):
    corpus = _ar_corpus(tmp_path)
    out = tmp_path / "ar_vocab.txt"
    res = runner.invoke(app, ["build", str(corpus), "-o", str(out), "-l", "ar", "--size", "100"])
    assert res.exit_code == 0, res.output
    side = json.loads((tmp_path / "ar_vocab.json").read_text(encoding="utf-8"))
    assert side["strip_accents"] is False and side["vocab_size"] == len(Vocab.load(out)) <= 100
    tok = Tokenizer.from_vocab(out)
    assert not tok.strip_accents and "[UNK]" not in tok.tokens("كَتَبَ")
    res = runner.invoke(app, ["build", str(corpus), "-o", str(out), "-l", "ar", "--size", "20"])
    assert isinstance(res.exception, ZenError) and "--size 20 is too small" in str(res.exception)


def test_build_zh_in_worker_processes_counts_the_same(tmp_path: Path, monkeypatch):
    """Byte ranges counted in two processes (many small ranges, cut inside lines) give the vocabulary,
    counts and line totals of one process; a bad byte is named at its line in the whole file."""
    from zencli.text import vocab_build

    lines = [("甲乙丙丁戊己庚辛" * 3)[k % 7 : k % 7 + 5 + k % 11] + ("，Ab" if k % 3 else "") for k in range(400)]
    corpus = write(tmp_path / "c.txt", "\n".join(lines) + "\n")
    other = write(tmp_path / "d.txt", "壬癸\n\n甲\n")
    one = build_vocab([corpus, other], min_freq=2)
    monkeypatch.setattr(vocab_build, "_RANGE_BYTES", 97)  # ranges planned here, so the patch holds
    two = build_vocab([corpus, other], min_freq=2, workers=2)
    assert two.vocab.tokens == one.vocab.tokens and two.info == one.info
    assert one.info["corpus_lines"] == 403
    bad = tmp_path / "bad.txt"
    bad.write_bytes(("\n".join(lines[:300]) + "\n").encode() + b"\xff\xfe\n" + "甲\n".encode())
    with pytest.raises(ZenError, match=r"bad\.txt:301: invalid UTF-8"):
        build_vocab([bad], workers=2)
