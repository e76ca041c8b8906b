"""--encoding-errors replace: damaged UTF-8 read as U+FFFD, one per undecodable sequence (a surrogate half
encoded as UTF-8 is one), counted and reported in one line; strict (the default) stays a one-line error."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write
from zencli.errors import ZenError
from zencli.text.reading import decoding, iter_lines

HALF = "\ud83d".encode("utf-8", "surrogatepass")  # b"\xed\xa0\xbd": the first half of an emoji, on its own
# line 1: a surrogate half between two characters; line 3: a stray continuation byte and a truncated 3-byte
# character; line 4: a real U+FFFD, which is not counted as a replacement
DAMAGED = b"a" + HALF + b"b\nok\n\x80x\xe4\xb8\n\xef\xbf\xbd\n"


def test_replace_gives_one_fffd_per_sequence_and_counts_them(tmp_path: Path):
    path = tmp_path / "damaged.txt"
    path.write_bytes(DAMAGED)
    with pytest.raises(ZenError, match=r"damaged.txt:1: invalid UTF-8 at byte offset 1 \(byte 0xed\)"):
        list(iter_lines(path))  # strict: today's behaviour
    with decoding("replace") as replaced:
        lines = [t for _, t in iter_lines(path)]
        list(iter_lines(path))  # read twice (format detection, then reading): counted once
    assert lines == ["a\ufffdb", "ok", "\ufffdx\ufffd", "\ufffd"]
    assert len(lines[0]) == 3  # the half is one character: char-per-line files keep their alignment
    assert replaced.sequences == 3 and len(replaced.lines) == 2
    assert replaced.summary() == ("--encoding-errors replace: 3 undecodable byte sequence(s) on 2 line(s) became "
                                  f"U+FFFD (lines per file: {path}: 2)")
    with decoding("replace") as clean:
        list(iter_lines(write(tmp_path / "clean.txt", ["甲"])))
    assert clean.summary() is None
    with pytest.raises(ZenError, match="encoding errors: expected one of strict, replace, got 'ignore'"):
        with decoding("ignore"):
            pass


def test_char_per_line_labels_stay_aligned(tmp_path: Path):
    """A character-per-line NER file (Weibo's layout) with a split emoji: one row per character still."""
    from zencli.data.readers.tagging import read_tagging

    path = tmp_path / "weibo.txt"
    path.write_bytes(b"\xe6\x88\x91\tO\n" + HALF + b"\tO\n\xe7\x8e\x8b\tS-PER\n\n")
    with decoding("replace"):
        sentences, _ = read_tagging(path, "ner")
    assert [(s.chars, s.labels) for s in sentences] == [(["我", "\ufffd", "王"], ["O", "O", "S-PER"])]


def _zen(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zencli", *args], cwd=cwd, capture_output=True, text=True)


def test_commands_take_the_option_and_report_in_one_stderr_line(tmp_path: Path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(DAMAGED * 3)
    r = _zen("vocab", "build", str(corpus), "-o", "vocab.txt", cwd=tmp_path)
    assert r.returncode == 2 and "corpus.txt:1: invalid UTF-8" in r.stderr and "--encoding-errors" in r.stderr
    r = _zen("vocab", "build", str(corpus), "-o", "vocab.txt", "--encoding-errors", "replace", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "\n" not in r.stderr.strip() and r.stderr.strip().startswith(
        "zen: --encoding-errors replace: 9 undecodable byte sequence(s) on 6 line(s) became U+FFFD")
    assert "x" in (tmp_path / "vocab.txt").read_text(encoding="utf-8").split()  # (BERT's cleaning drops U+FFFD)
    # a recipe key where the command has a recipe; counting in 2 worker processes reports all of them
    r = _zen("lexicon", "build", str(corpus), "-o", "ngram.txt", "--workers", "2", "--set", "chunk_chars=1000",
             "--set", "encoding_errors=replace", "--min-freq", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "zen: --encoding-errors replace: 9 undecodable byte sequence(s) on 6 line(s)" in r.stderr
    r = _zen("lexicon", "build", str(corpus), "-o", "ngram.txt", "--encoding-errors", "ignore", cwd=tmp_path)
    assert r.returncode == 2 and "encoding_errors: expected one of 'strict', 'replace', got 'ignore'" in r.stderr


def test_finetune_reads_damaged_data_with_the_recipe_key(tmp_path: Path):
    from typer.testing import CliRunner

    from zencli.cli.app import app

    train = tmp_path / "train.tsv"
    train.write_bytes((b"\xe6\x88\x91\tO\n" + HALF + b"\tO\n\xe7\x8e\x8b\tS-PER\n\n") * 4)
    r = CliRunner().invoke(app, ["finetune", "--task", "ner", "--train", str(train), "--max-steps", "1",
                                 "--output", str(tmp_path / "run"), "--set", "data.encoding_errors=replace",
                                 "--vocab", str(write(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                                                "[MASK]", "我", "王"])),
                                 "--encoder", "bert", "-q"])
    assert r.exit_code == 0, (r.output, r.exception)
    assert "4 undecodable byte sequence(s) on 4 line(s)" in r.output  # CliRunner mixes stderr in
