"""Pretraining example generation: whole n-gram masking, the 15% budget, the no-leak invariant, NSP,
determinism across seeds and workers, resuming, and the bad-input errors."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from zencli.data.masking import drop_covering_masked
from zencli.data.pretraining import generate_shards, plan_parts
from zencli.data.pretraining import workers as pretraining  # the module whose _make_shard the tests wrap
from zencli.data.segmenters import LexiconSegmenter
from zencli.data.shards import MANIFEST_NAME, PretrainShards, read_manifest
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.vocab import Vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CHARS = list("天地人日月山水火木金土上下大小中国北京学生老师朋友我们你他在的了是有。，")
WORDS = ["北京", "中国", "学生", "老师", "朋友", "我们", "大学", "天地", "日月", "山水", "上下", "金木水火土",
         "北京大学", "中国人", "的", "了", "是", "有", "在", "你", "他", "大", "小"]
LEXICON_WORDS = ["北京", "中国", "学生", "老师", "朋友", "我们", "日月", "山水", "金木水火土", "北京大学", "中国人",
                 "大学", "学生们", "老师的"]


def make_inputs(tmp_path: Path, n_docs: int = 40, seed: int = 0, blank_lines: bool = True) -> tuple[Path, Path, Path]:
    """A corpus of random sentences made of WORDS, a char vocabulary and a lexicon, as files."""
    rng = np.random.default_rng(seed)
    lines: list[str] = []
    for _ in range(n_docs):
        doc = []
        for _ in range(int(rng.integers(1, 7))):
            n = int(rng.integers(3, 16))
            doc.append("".join(WORDS[int(k)] for k in rng.integers(0, len(WORDS), size=n)) + "。")
        lines += [*doc, ""] if blank_lines else ["".join(doc)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    Vocab(SPECIALS + CHARS).save(vocab)
    lexicon = tmp_path / "ngram.txt"
    Lexicon([tuple(w) for w in LEXICON_WORDS], [100 - i for i in range(len(LEXICON_WORDS))]).save(lexicon)
    return corpus, vocab, lexicon


def shard_bytes(out: Path) -> dict[str, str]:
    """sha256 of every array file of every shard."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.glob("shard-*/*.npy"))}


def original_ids(rec: dict) -> np.ndarray:
    """The uncorrupted token ids of a record: labels where masked, inputs elsewhere."""
    labels = rec["mlm_labels"]
    return np.where(labels != -100, labels, rec["input_ids"])


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gen")
    corpus, vocab, lexicon = make_inputs(tmp, n_docs=120)
    out = tmp / "shards"
    result = generate_shards([corpus], vocab, lexicon, out, max_seq_len=48, dupe_factor=2,
                             examples_per_shard=40, seed=3)
    return tmp, corpus, vocab, lexicon, out, result


def test_shards_hold_nsp_pairs_of_the_corpus(generated):
    _, corpus, vocab_path, _, out, result = generated
    manifest = read_manifest(out)
    assert manifest["complete"] and result.made == manifest["n_shards"] == 2 * manifest["n_parts"] > 2
    ds = PretrainShards(out)
    vocab = Vocab.load(vocab_path)
    text = corpus.read_text(encoding="utf-8").replace("\n", "")
    cls, sep = vocab.cls_id, vocab.sep_id
    nsp = []
    for i in range(len(ds)):
        rec = ds[i]
        ids = original_ids(rec)
        n, seg_a = len(ids), int(np.argmin(rec["token_type_ids"] == 0))
        assert n <= 48 and ids[0] == cls and ids[seg_a - 1] == sep and ids[-1] == sep
        assert (rec["token_type_ids"][:seg_a] == 0).all() and (rec["token_type_ids"][seg_a:] == 1).all()
        a = "".join(vocab.id_to_token(int(t)) for t in ids[1 : seg_a - 1])
        b = "".join(vocab.id_to_token(int(t)) for t in ids[seg_a:-1])
        assert a and b and a in text and b in text
        if int(rec["nsp_labels"]) == 0:
            assert a + b in text  # the true continuation
        nsp.append(int(rec["nsp_labels"]))
    assert 0.3 < np.mean(nsp) < 0.8
    assert manifest["totals"]["examples"] == len(ds)


def test_whole_ngram_masking_masks_whole_lexicon_units(generated):
    """Every unit of the segmentation (FMM on the lexicon) is masked entirely or not at all, and many
    masked units are multi-token n-grams."""
    _, _, vocab_path, lexicon_path, out, _ = generated
    vocab, seg = Vocab.load(vocab_path), LexiconSegmenter(Lexicon.load(lexicon_path))
    ds = PretrainShards(out)
    multi = 0
    for i in range(len(ds)):
        rec = ds[i]
        ids, masked = original_ids(rec), rec["mlm_labels"] != -100
        toks = [vocab.id_to_token(int(t)) for t in ids]
        seg_a = int(rec["token_type_ids"].argmax())
        for lo, hi in ((1, seg_a - 1), (seg_a, len(ids) - 1)):
            for s, e in seg.segment(toks[lo:hi]):
                unit = masked[lo + s : lo + e]
                assert unit.all() or not unit.any(), (i, toks[lo + s : lo + e], unit)
                multi += bool(unit.all() and e - s > 1)
    assert multi > 0.2 * read_manifest(out)["totals"]["masked_units"]


def test_mask_budget_and_corruption_rates(generated):
    *_, out, _ = generated
    t = read_manifest(out)["totals"]
    assert abs(t["masked_fraction"] - 0.15) < 0.02
    assert abs(t["masked_as_mask"] / t["masked"] - 0.8) < 0.05
    assert abs(t["masked_as_random"] / t["masked"] - 0.1) < 0.04
    ds = PretrainShards(out)
    for i in range(len(ds)):
        rec = ds[i]
        n_masked = int((rec["mlm_labels"] != -100).sum())
        budget = max(1, round((len(rec["input_ids"]) - 3) * 0.15))
        # over budget only when every unit is longer: then one unit (lexicon words have <= 5 tokens)
        assert 1 <= n_masked <= max(budget, 5)
        assert not (rec["mlm_labels"][[0, -1]] != -100).any()  # [CLS] / [SEP] are never targets


@pytest.mark.parametrize("masking", ["ngram", "char"])
def test_no_ngram_slot_covers_a_masked_position(tmp_path, masking):
    """THE invariant: the n-gram encoder must not see an n-gram over a masked (incl. kept or randomly
    replaced) position. Checked over every generated example; the check is not vacuous: matching the
    clean text would put slots over masked positions in many examples."""
    corpus, vocab_path, lexicon_path = make_inputs(tmp_path, n_docs=150)
    out = tmp_path / "out"
    generate_shards([corpus], vocab_path, lexicon_path, out, max_seq_len=64, masking=masking, seed=1)
    ds = PretrainShards(out)
    from zencli.data.features import NgramFeaturizer

    clean = NgramFeaturizer(Vocab.load(vocab_path), Lexicon.load(lexicon_path), max_seq_len=64, max_ngrams=64)
    lexicon = Lexicon.load(lexicon_path)
    vocab = Vocab.load(vocab_path)
    slots = leaks_if_clean = 0
    for i in range(len(ds)):
        rec = ds[i]
        masked = rec["mlm_labels"] != -100
        assert drop_covering_masked(rec["ngram_starts"], rec["ngram_lengths"], masked).all()
        # slots were matched on the corrupted ids: each slot's tokens in input_ids are its n-gram
        for g, s, n in zip(rec["ngram_ids"], rec["ngram_starts"], rec["ngram_lengths"]):
            assert [vocab.id_to_token(int(t)) for t in rec["input_ids"][s : s + n]] == list(lexicon.ngrams[g - 1])
        slots += len(rec["ngram_ids"])
        ids = original_ids(rec)
        seg_a = int(rec["token_type_ids"].argmax())
        c = clean.featurize(ids[1 : seg_a - 1], ids[seg_a:-1])
        leaks_if_clean += not drop_covering_masked(c["ngram_starts"], c["ngram_lengths"], masked).all()
    assert slots > 2 * len(ds)
    assert leaks_if_clean > len(ds) // 4


def test_same_seed_same_bytes_any_number_of_workers(tmp_path):
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=60)
    kw = {"max_seq_len": 40, "examples_per_shard": 25, "seed": 7}
    generate_shards([corpus], vocab, lexicon, tmp_path / "a", workers=1, **kw)
    generate_shards([corpus], vocab, lexicon, tmp_path / "b", workers=2, **kw)
    generate_shards([corpus], vocab, lexicon, tmp_path / "c", workers=1, **{**kw, "seed": 8})
    a, b, c = (shard_bytes(tmp_path / x) for x in "abc")
    assert len(a) > 11 and a == b  # several shards, identical files
    assert a.keys() == c.keys() and a != c
    assert read_manifest(tmp_path / "a")["totals"] == read_manifest(tmp_path / "b")["totals"]


def test_an_interrupted_run_resumes_to_the_same_shards(tmp_path, monkeypatch):
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=60)
    kw = {"max_seq_len": 40, "examples_per_shard": 20, "seed": 5}
    generate_shards([corpus], vocab, lexicon, tmp_path / "clean", **kw)

    real = pretraining._make_shard
    calls = []

    def dies_on_third(task):
        calls.append(task.index)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C while shard 3 was being made
        return real(task)

    monkeypatch.setattr(pretraining, "_make_shard", dies_on_third)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        generate_shards([corpus], vocab, lexicon, out, **kw)
    manifest = read_manifest(out)
    assert not manifest["complete"] and len(manifest["shards"]) == 2
    with pytest.raises(ZenError, match=r"generation is incomplete \(2 of \d+ shards\)"):
        PretrainShards(out)
    # A killed writer leaves its temp folder behind:
    (out / ".tmp-shard-00009-12345").mkdir()
    (out / ".tmp-shard-00009-12345" / "input_ids.npy").write_bytes(b"partial")
    (out / ".manifest.json.tmp-12345").write_text("{", encoding="utf-8")

    made = []
    monkeypatch.setattr(pretraining, "_make_shard", lambda t: made.append(t.index) or real(t))
    result = generate_shards([corpus], vocab, lexicon, out, **kw)
    assert made == list(range(2, manifest["n_shards"])) and result.reused == 2
    assert shard_bytes(out) == shard_bytes(tmp_path / "clean")
    assert not list(out.glob(".*"))  # no temp files, no tokenized corpus left behind
    # Running again with everything complete makes nothing.
    again = generate_shards([corpus], vocab, lexicon, out, **kw)
    assert again.made == 0 and again.reused == manifest["n_shards"]


def test_a_shard_renamed_but_not_in_the_manifest_is_kept(tmp_path, monkeypatch):
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=40)
    kw = {"max_seq_len": 40, "examples_per_shard": 20, "seed": 5}
    out = tmp_path / "out"
    generate_shards([corpus], vocab, lexicon, out, **kw)
    before = shard_bytes(out)
    manifest = read_manifest(out)
    # As if the run died right after shard 1's rename: the manifest lists only shard 0.
    manifest["shards"], manifest["complete"] = manifest["shards"][:1], False
    (out / MANIFEST_NAME).write_text(json.dumps(manifest), encoding="utf-8")
    made = []
    real = pretraining._make_shard
    monkeypatch.setattr(pretraining, "_make_shard", lambda t: made.append(t.index) or real(t))
    result = generate_shards([corpus], vocab, lexicon, out, **kw)
    assert made == [] and result.reused == manifest["n_shards"] and read_manifest(out)["complete"]
    assert shard_bytes(out) == before


def test_other_settings_in_the_same_folder_are_an_error_unless_overwrite(tmp_path):
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=20)
    out = tmp_path / "out"
    generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=1)
    with pytest.raises(ZenError, match=r"holds shards made with other settings \(settings\.seed: 1 there, 2 now\)"):
        generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=2)
    result = generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=2, overwrite=True)
    assert result.made == read_manifest(out)["n_shards"] and read_manifest(out)["settings"]["seed"] == 2
    # Changing the corpus changes the fingerprint too.
    corpus.write_text(corpus.read_text(encoding="utf-8") + "\n中国人在北京。\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"other settings \(corpus"):
        generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=2)


def test_complete_shards_of_earlier_draws_are_kept_an_unfinished_run_is_not(tmp_path):
    """Shards made before the draws changed (`DRAWS`) hold valid examples of the same settings: a complete
    set is used as it is; an unfinished one is not continued with other draws."""
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=20)
    out = tmp_path / "out"
    generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=1)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    del manifest["inputs"]["draws"]
    manifest["fingerprint"] = "made-by-earlier-draws"
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    result = generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=1)
    assert result.made == 0 and result.reused == manifest["n_shards"]
    manifest["complete"] = False
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ZenError, match=r"holds shards made with other settings \(draws"):
        generate_shards([corpus], vocab, lexicon, out, max_seq_len=40, seed=1)


def test_layout_line_splits_documents_into_sentences(tmp_path):
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=30, blank_lines=False)
    out = tmp_path / "out"
    generate_shards([corpus], vocab, lexicon, out, max_seq_len=64)
    manifest = read_manifest(out)
    assert manifest["documents"] == 30
    assert manifest["corpus_tokens"] == len(corpus.read_text(encoding="utf-8").replace("\n", ""))


def test_lexicon_that_does_not_match_the_vocabulary(tmp_path):
    corpus, vocab, _ = make_inputs(tmp_path, n_docs=10)
    foreign = tmp_path / "foreign.txt"
    Lexicon([tuple("北京"), tuple("ABC"), tuple("xyz"), tuple("好人")], [5, 4, 3, 2]).save(foreign)
    with pytest.raises(ZenError, match=r"lexicon does not match the vocabulary: 3 of 4 n-grams contain tokens not in"):
        generate_shards([corpus], vocab, foreign, tmp_path / "out")
    half = tmp_path / "half.txt"
    Lexicon([tuple("北京"), tuple("中国"), tuple("学生"), tuple("好人")], [5, 4, 3, 2]).save(half)
    generate_shards([corpus], vocab, half, tmp_path / "out2", max_seq_len=40)
    assert read_manifest(tmp_path / "out2")["lexicon"]["unmatched_ngrams"] == 1


def test_one_document_and_empty_corpus_are_clear_errors(tmp_path):
    _, vocab, lexicon = make_inputs(tmp_path, n_docs=1)
    one = tmp_path / "one.txt"
    one.write_text("北京大学的学生。\n中国人在北京。\n", encoding="utf-8")  # blank-line layout: 1 document
    with pytest.raises(ZenError, match="fewer than two documents"):
        generate_shards([one], vocab, lexicon, tmp_path / "o1", layout="blank-line")
    empty = tmp_path / "blank.txt"
    empty.write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"blank\.txt: no text to pretrain on"):
        generate_shards([empty], vocab, lexicon, tmp_path / "o2")
    with pytest.raises(ZenError, match="max_seq_len: expected 5"):
        generate_shards([one], vocab, lexicon, tmp_path / "o3", max_seq_len=4)
    with pytest.raises(ZenError, match="masking: expected one of ngram, char"):
        generate_shards([one], vocab, lexicon, tmp_path / "o3", masking="word")


def test_parts_hold_whole_documents_at_least_two_each():
    tokens = np.array([10, 300, 5, 5, 5, 200, 7, 1000, 3])
    parts = plan_parts(tokens, max_seq_len=128, examples_per_shard=3)
    assert parts[0][0] == 0 and parts[-1][1] == len(tokens)
    assert all(p[1] == q[0] for p, q in itertools.pairwise(parts))
    assert all(hi - lo >= 2 for lo, hi in parts)
    assert plan_parts(np.array([5, 5]), 128, 1) == [(0, 2)]


def test_the_corpus_tokenized_into_files_is_the_corpus_tokenized_in_memory(tmp_path, monkeypatch):
    """A large corpus is tokenized straight into the work folder (flushed every FLUSH_ITEMS tokens) and read back
    memory-mapped: the same arrays, hence the same shards, as tokenizing it in memory; the folder is gone after."""
    from zencli.data.pretraining import corpus as corpus_module
    from zencli.data.pretraining import generate as generate_module
    from zencli.text.tokenizer import Tokenizer

    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=60)
    tokenizer = Tokenizer.from_vocab(Vocab.load(vocab))
    in_memory = corpus_module.tokenize_corpus([corpus], tokenizer, "auto")
    monkeypatch.setattr(corpus_module, "FLUSH_ITEMS", 7)  # many flushes, at document ends
    on_disk = corpus_module.tokenize_corpus([corpus], tokenizer, "auto", directory=tmp_path / "work")
    for name in corpus_module.ARRAYS:
        a, b = getattr(in_memory, name), getattr(on_disk, name)
        assert isinstance(b, np.memmap) and b.dtype == a.dtype and np.array_equal(a, b), name
        assert np.array_equal(np.load(tmp_path / "work" / f"{name}.npy"), a)
    assert on_disk.chars == in_memory.chars and on_disk.n_docs == in_memory.n_docs > 2

    kw = {"max_seq_len": 40, "examples_per_shard": 25, "seed": 7}
    generate_shards([corpus], vocab, lexicon, tmp_path / "streamed", workers=1, **kw)
    generate_shards([corpus], vocab, lexicon, tmp_path / "streamed-2", workers=2, **kw)
    real = generate_module.tokenize_corpus
    monkeypatch.setattr(generate_module, "tokenize_corpus",
                        lambda files, tok, layout, on_doc, directory, workers: real(files, tok, layout, on_doc))
    generate_shards([corpus], vocab, lexicon, tmp_path / "memory", workers=1, **kw)
    streamed, memory = shard_bytes(tmp_path / "streamed"), shard_bytes(tmp_path / "memory")
    assert len(streamed) > 11 and streamed == memory == shard_bytes(tmp_path / "streamed-2")
    assert not any(p.name.startswith(".work") for d in ("streamed", "streamed-2", "memory")
                   for p in (tmp_path / d).iterdir())


# sha256 over the shard files of `test_shards_keep_their_bytes`'s generations. A change of the draws or of
# the layout changes it: then bump `DRAWS` (settings.py) so that a resumed run does not mix the two.
PINNED_SHARDS = {"ngram": "16f6871d914019756ac0c503066549e5800e126affaa2550f7e753f18008e37a",
                 "char": "3660c062200478211970a90250f27b88ac8c9754145441666a026befa50d3170"}


@pytest.mark.parametrize("masking", ["ngram", "char"])
def test_shards_keep_their_bytes(tmp_path: Path, masking: str):
    """The bytes of a fixed generation: refactors of the pairs, masking or matching must not move them."""
    corpus, vocab, lexicon = make_inputs(tmp_path, n_docs=60, seed=7)
    out = tmp_path / masking
    generate_shards([corpus], vocab, lexicon, out, max_seq_len=24, dupe_factor=2, examples_per_shard=30,
                    masking=masking, short_seq_prob=0.3, seed=11)
    digest = hashlib.sha256(json.dumps(shard_bytes(out), sort_keys=True).encode()).hexdigest()
    assert digest == PINNED_SHARDS[masking]


@pytest.mark.parametrize("blank_lines", [True, False])
def test_the_corpus_tokenized_in_worker_processes_is_the_corpus_tokenized_in_one(tmp_path, monkeypatch,
                                                                                 blank_lines: bool):
    """Byte ranges of whole documents (a blank-line file cut after blank lines) tokenized in two processes and
    joined: the arrays of one process; a bad byte is named at its line in the whole file."""
    from zencli.data.pretraining import corpus as corpus_module
    from zencli.text.tokenizer import Tokenizer

    corpus, vocab, _ = make_inputs(tmp_path, n_docs=80, blank_lines=blank_lines)
    tokenizer = Tokenizer.from_vocab(Vocab.load(vocab))
    one = corpus_module.tokenize_corpus([corpus, corpus], tokenizer, "auto", directory=tmp_path / "one")
    monkeypatch.setattr(corpus_module, "_RANGE_BYTES", 300)  # many ranges, planned in this process
    two = corpus_module.tokenize_corpus([corpus, corpus], tokenizer, "auto", directory=tmp_path / "two", workers=2)
    for name in corpus_module.ARRAYS:
        assert np.array_equal(getattr(one, name), getattr(two, name)), name
    assert two.chars == one.chars and two.n_docs == one.n_docs > 100
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(f"{n}.npy" for n in corpus_module.ARRAYS)
    text = corpus.read_bytes()
    cut = text.index(b"\n", len(text) * 3 // 4) + 1
    bad = tmp_path / "bad.txt"
    bad.write_bytes(text[:cut] + b"\xff\n" + text[cut:])
    line = text[:cut].count(b"\n") + 1
    with pytest.raises(ZenError, match=rf"bad\.txt:{line}: invalid UTF-8"):
        # the layout given: the error comes from a worker, not from the layout's detection here
        layout = "blank-line" if blank_lines else "line"
        corpus_module.tokenize_corpus([bad], tokenizer, layout, directory=tmp_path / "bad", workers=2)
