"""benchmarks/gen_corpus.py, the synthetic corpus for scale measurements: paragraphs in PD98's raw layout,
the same bytes for the same seed, and distinct n-grams that keep growing with the size (as in real text,
unlike a file repeated). benchmarks/scale.py's stage commands and table, on a made-up text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.gen_corpus import CharModel, main, parse_size
from benchmarks.scale import corpus_size, stage_command, table

# A made-up training text: sentences of random made-up words, one paragraph per line.
WORDS = ["北京", "中国", "学生", "老师", "朋友", "我们", "大学", "天地", "日月", "山水", "上下", "经济", "发展",
         "人民", "政府", "工作", "建设", "改革", "开放", "社会", "主义", "的", "了", "是", "有", "在", "和"]


def made_up_text(lines: int = 300, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(lines):
        sents = ["".join(WORDS[int(k)] for k in rng.integers(0, len(WORDS), size=int(rng.integers(3, 12)))) + "。"
                 for _ in range(int(rng.integers(1, 4)))]
        out.append("".join(sents))
    return "\n".join(out) + "\n"


def distinct(text: str, n: int) -> int:
    return len({line[i : i + n] for line in text.splitlines() for i in range(len(line) - n + 1)})


@pytest.fixture()
def train(tmp_path: Path) -> Path:
    path = tmp_path / "train.txt"
    path.write_text(made_up_text(), encoding="utf-8")
    return path


def generate(tmp_path: Path, train: Path, chars: str, seed: int = 0, name: str = "out.txt") -> str:
    out = tmp_path / name
    assert main(["--chars", chars, "-o", str(out), "--train", str(train), "--seed", str(seed), "--quiet"]) == 0
    return out.read_bytes().decode("utf-8")


def test_same_seed_same_bytes_other_seed_other_text(tmp_path, train):
    a = generate(tmp_path, train, "20k", seed=1, name="a.txt")
    b = generate(tmp_path, train, "20k", seed=1, name="b.txt")
    c = generate(tmp_path, train, "20k", seed=2, name="c.txt")
    assert a == b and a != c
    assert not (tmp_path / "a.txt.part").exists()


def test_paragraph_lines_of_the_size_asked(tmp_path, train):
    text = generate(tmp_path, train, "30k")
    lines = text.split("\n")
    assert text.endswith("\n") and lines[-1] == "" and all(lines[:-1])  # one paragraph a line, none empty
    chars = sum(len(line) for line in lines)
    longest = max(len(line) for line in made_up_text().splitlines())
    assert 30_000 <= chars < 30_000 + 20 * longest  # stops at the first line end at or after the size
    assert set(text) <= set(made_up_text())  # characters of the training text only
    assert corpus_size(tmp_path / "out.txt") == (chars, len(lines) - 1)


def test_distinct_ngrams_grow_with_the_size(tmp_path, train):
    """Distinct 6-grams keep growing from 20k to 80k characters: the generator recombines the training text
    (a file repeated would stop at the training text's own count)."""
    small, large = generate(tmp_path, train, "20k", name="s.txt"), generate(tmp_path, train, "80k", name="l.txt")
    train_text = train.read_text(encoding="utf-8")
    assert distinct(large, 6) > 1.5 * distinct(small, 6)
    assert distinct(large, 6) > 1.2 * distinct(train_text, 6)
    assert large.startswith(small[: len(small) // 2])  # the same stream, written further


def test_model_and_sizes():
    assert parse_size("10M") == 10_000_000 and parse_size("1G") == 10**9 and parse_size("2.5k") == 2500
    assert parse_size("1_000") == 1000
    model = CharModel("甲乙丙\n乙丙丁\n", order=2)
    assert model.codes[0] == 10 and model.distinct_contexts() > 1
    with pytest.raises(ValueError, match="two non-empty lines"):
        CharModel("甲乙丙\n\n")


def test_scale_stage_commands_and_table(tmp_path):
    corpus, work = tmp_path / "c.txt", tmp_path / "w"
    lexicon = stage_command("lexicon", corpus, work, steps=50, workers=1)
    assert "lexicon-zh-pd98-entropy" in lexicon and lexicon[-2:] == ["--workers", "1"]
    data = stage_command("data", corpus, work, steps=50, workers=1)
    pretrain = stage_command("pretrain", corpus, work, steps=50, workers=1)
    assert "pretrain-zh-tiny" in data and str(work / "pretrain") in data and "--max-steps" in pretrain
    assert pretrain[pretrain.index("--max-steps") + 1] == "50"
    assert stage_command("lexicon", corpus, work, 50, 1, None, ["first_pass_n=0"])[-2:] == ["--set", "first_pass_n=0"]
    stage = {"rc": 0, "wall_s": 2.0, "cpu_s": 1.0, "peak_rss_tree_mb": 100.0, "peak_rss_max_process_mb": 90.0}
    md = table({"10M": {"chars": 10_000_000, "stages": {"floor-python": stage,
                                                        "lexicon": {**stage, "wall_s": 20.0, "peak_disk_gb": 0.6}}}})
    assert "| 10M | lexicon | 20.0 | 1.0 | 0.50 | 10.00 | 100 | 90 | 0.6 | 10.0 |" in md


def test_scale_measures_a_stage_and_the_disk_it_fills(tmp_path):
    from benchmarks.scale import run_measured

    work = tmp_path / "w"
    work.mkdir()
    (work / "before.bin").write_bytes(b"x" * 1000)  # there at the start: not counted
    cmd = ["sh", "-c", f"head -c 3000000 /dev/zero > {work}/tmp.bin; sleep 2.5; rm {work}/tmp.bin"]
    r = run_measured(cmd, tmp_path / "log", disk=work)
    assert r["rc"] == 0 and r["wall_s"] >= 2.5 and r["peak_disk_gb"] == 0.0  # 3 MB: 0.00 GB
    cmd = ["sh", "-c", f"head -c 30000000 /dev/zero > {work}/tmp.bin; sleep 2.5; rm {work}/tmp.bin"]
    assert run_measured(cmd, tmp_path / "log", disk=work)["peak_disk_gb"] == 0.03  # gone by the end, still seen
