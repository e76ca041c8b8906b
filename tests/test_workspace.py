"""The workspace that chains the no-argument commands: where each step writes, which finished step the next
one reads, the one-line "run `zen X` first" errors, the task → recipe/data table, and bare `zen lexicon`
(with its subcommands still working). A tiny made-up corpus in the PD98 layout stands in for the data
($ZEN_DATA); nothing is downloaded."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_pretrain_cli import error, zen
from zencli.errors import ZenError
from zencli.jobs.workspace import STEP_MINUTES, TASK_DEFAULTS, Workspace, as_overrides

runner = CliRunner()

# Made-up "words" over two disjoint CJK ranges: plain words, and entity words with a type. Sentences are a
# word-level Markov chain (each word has three likely successors) with entities dropped in, so the lexicon
# finds n-grams, the pretraining has structure to learn and every NER label occurs in every split.
_PLAIN = [chr(c) for c in range(0x4E00 + 300, 0x4E00 + 360)]
_NAMED = [chr(c) for c in range(0x4E00 + 600, 0x4E00 + 640)]
_RNG = random.Random(11)
WORDS = ["".join(_RNG.choice(_PLAIN) for _ in range(_RNG.choice([1, 2, 2, 3]))) for _ in range(50)]
ENTITIES = [("".join(_RNG.choice(_NAMED) for _ in range(n)), kind)
            for kind, n in [("PER", 2), ("PER", 3), ("LOC", 2), ("LOC", 1), ("ORG", 4), ("ORG", 3)] * 2]


def _sentence(rng: random.Random) -> list[tuple[str, str | None]]:
    """(word, entity type or None) of one made-up sentence."""
    w = [rng.randrange(len(WORDS))]
    for _ in range(rng.randint(5, 12)):
        w.append((w[-1] * 7 + rng.choice([1, 2, 3])) % len(WORDS))
    words: list[tuple[str, str | None]] = [(WORDS[i], None) for i in w]
    for _ in range(rng.randint(1, 2)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(ENTITIES))
    return words + [("。", None)]


def _char_labels(words: list[tuple[str, str | None]], bio: bool = False) -> list[tuple[str, str]]:
    out = []
    for word, kind in words:
        for i, ch in enumerate(word):
            if kind is None:
                out.append((ch, "O"))
            elif bio:
                out.append((ch, ("B-" if i == 0 else "I-") + kind))
            elif len(word) == 1:
                out.append((ch, "S-" + kind))
            else:
                out.append((ch, ("B-" if i == 0 else "E-" if i == len(word) - 1 else "M-") + kind))
    return out


def _pos_labels(words: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    out = []
    for word, kind in words:
        tag = {"PER": "nr", "LOC": "ns", "ORG": "nt"}.get(kind or "", "w" if word == "。" else "n")
        for i, ch in enumerate(word):
            prefix = "S-" if len(word) == 1 else "B-" if i == 0 else "E-" if i == len(word) - 1 else "M-"
            out.append((ch, prefix + tag))
    return out


def _tsv(sentences: list[list[tuple[str, str]]]) -> str:
    return "".join("".join(f"{c}\t{label}\n" for c, label in s) + "\n" for s in sentences)


def write_corpus(root: Path, sizes: tuple[int, int, int] = (300, 40, 40)) -> Path:
    """A made-up dataset in the PD98 layout (raw, cws, pos, ner, ner-bio × train/dev/test, NOTICE,
    stats.json) at root/pd98; returns root (for $ZEN_DATA)."""
    d = root / "pd98"
    rng = random.Random(5)
    for split, n in zip(("train", "dev", "test"), sizes):
        sents = [_sentence(rng) for _ in range(n)]
        files = {
            f"raw/{split}.txt": "".join("".join(w for w, _ in s) + "\n" for s in sents),
            f"cws/{split}.txt": "".join(" ".join(w for w, _ in s) + "\n" for s in sents),
            f"pos/{split}.tsv": _tsv([_pos_labels(s) for s in sents]),
            f"ner/{split}.tsv": _tsv([_char_labels(s) for s in sents]),
            f"ner-bio/{split}.tsv": _tsv([_char_labels(s, bio=True) for s in sents]),
        }
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text, encoding="utf-8")
    (d / "NOTICE").write_text("made-up test data\n", encoding="utf-8")
    (d / "stats.json").write_text("{}\n", encoding="utf-8")
    return root


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """$ZEN_DATA with the made-up pd98; an empty cache, so nothing else is found (or fetched)."""
    root = write_corpus(tmp_path / "data")
    monkeypatch.setenv("ZEN_DATA", str(root))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ZEN_WORKDIR", raising=False)
    return root / "pd98"




def fake_pretrained(ws: Workspace) -> Path:
    """What the finetune defaults look for (no weights: only the config is read here)."""
    ws.pretrained_model.mkdir(parents=True)
    (ws.pretrained_model / "config.json").write_text("{}\n", encoding="utf-8")
    (ws.pretrain_dir / "results.json").write_text("{}\n", encoding="utf-8")
    return ws.pretrained_model


# --- where, and what is missing ---------------------------------------------------------------------------

def test_workdir_comes_from_the_option_then_the_environment_then_the_default(tmp_path, monkeypatch):
    monkeypatch.delenv("ZEN_WORKDIR", raising=False)
    assert Workspace.at().root == Path("zen-work") and Workspace.at().flag() == ""
    assert Workspace.at(tmp_path / "a").root == tmp_path / "a"
    assert Workspace.at(tmp_path / "a").command("lexicon") == f"zen lexicon --workdir {tmp_path / 'a'}"
    monkeypatch.setenv("ZEN_WORKDIR", str(tmp_path / "env"))
    assert Workspace.at().root == tmp_path / "env" and Workspace.at().command("pretrain") == "zen pretrain"
    assert Workspace.at(tmp_path / "a").root == tmp_path / "a"
    assert Workspace.at(tmp_path / "a").command("predict < x.txt") == f"zen predict --workdir {tmp_path / 'a'} < x.txt"
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ZenError, match="is not a directory"):
        Workspace.at(tmp_path / "file")


def test_each_missing_step_names_the_command_to_run_first(tmp_path, data):
    ws = str(tmp_path / "ws")
    msg = error("pretrain", "--workdir", ws)
    assert f"run `zen lexicon --workdir {ws}` first" in msg
    msg = error("finetune", "--task", "ner", "--workdir", ws)
    assert f"run `zen pretrain --workdir {ws}` first" in msg
    msg = error("predict", "--workdir", ws)
    assert f"run `zen finetune --task ner --workdir {ws}` first" in msg
    # an interrupted pretraining is not a finished one
    (tmp_path / "ws" / "pretrain" / "checkpoints").mkdir(parents=True)
    msg = error("finetune", "--task", "ner", "--workdir", ws)
    assert "has not finished" in msg and f"`zen pretrain --workdir {ws}`" in msg
    assert "task.name: no task given; use --task ner" in error("finetune", "--workdir", ws)
    assert "--task spm: no default data" in error("finetune", "--task", "spm", "--workdir", ws)
    # a mistyped task is an unknown task (it was "no default data for this task"), with the closest name
    msg = error("finetune", "--task", "nerr", "--workdir", ws)
    assert "unknown task 'nerr' (did you mean 'ner'?); expected one of cws, dc, mrc, ner" in msg
    assert "default data" not in msg


def test_an_incomplete_lexicon_step_is_not_finished(tmp_path):
    ws = Workspace.at(tmp_path / "ws")
    ws.lexicon_dir.mkdir(parents=True)
    ws.vocab.write_text("[PAD]\n", encoding="utf-8")
    ws.ngram.write_text("a b,20\n", encoding="utf-8")
    assert not ws.lexicon_done()  # lexicon.json is written last
    with pytest.raises(ZenError, match="run `zen lexicon"):
        ws.require_lexicon()


def test_latest_finetuned_model_is_the_newest_finished_one(tmp_path):
    ws = Workspace.at(tmp_path)
    for i, task in enumerate(("ner", "cws")):
        m = ws.finetuned_model(task)
        m.mkdir(parents=True)
        (m / "task.json").write_text("{}", encoding="utf-8")
        os.utime(m / "task.json", ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
    (ws.finetune_dir("pos") / "model").mkdir(parents=True)  # unfinished: no task.json
    assert ws.latest_finetuned() == ws.finetuned_model("cws")
    os.utime(ws.finetuned_model("ner") / "task.json", ns=(2 * 10**18, 2 * 10**18))
    assert ws.finetuned_models() == [ws.finetuned_model("ner"), ws.finetuned_model("cws")]


def test_default_values_survive_the_override_syntax(tmp_path):
    from zencli.config.loading import apply_overrides

    odd = tmp_path / "a b: c" / "语料 #1.txt"
    got = apply_overrides({}, as_overrides({"data.corpus": [odd], "data.vocab": odd, "model.ngram": None,
                                            "train.lr": 5e-4, "data.build_missing": False}))
    assert got == {"data": {"corpus": [str(odd)], "vocab": str(odd), "build_missing": False},
                   "model": {"ngram": None}, "train": {"lr": 5e-4}}


# --- the defaults each command takes --------------------------------------------------------------------

def test_bare_lexicon_builds_vocab_and_lexicon_once_and_subcommands_still_work(tmp_path, data):
    ws = Workspace.at(tmp_path / "ws")
    out = zen("lexicon", "--workdir", str(ws.root), "--workers", "1")
    summary = json.loads(ws.lexicon_summary.read_text(encoding="utf-8"))
    assert summary["corpus"] == str(data / "raw" / "train.txt")
    vocab = ws.vocab.read_text(encoding="utf-8").splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and summary["vocab_size"] == len(vocab)
    corpus_chars = set((data / "raw" / "train.txt").read_text(encoding="utf-8").replace("\n", ""))
    assert corpus_chars == set(vocab[5:])  # every character of the training text, nothing else
    ngrams = ws.ngram.read_text(encoding="utf-8").splitlines()
    assert summary["ngrams"] == len(ngrams) > 10 and (ws.lexicon_dir / "vocab.json").is_file()
    assert "zen pretrain --workdir" in out
    # finished: a second run leaves the files alone; --overwrite builds them again (the same bytes)
    before = ws.ngram.stat().st_mtime_ns
    assert "already built" in zen("lexicon", "--workdir", str(ws.root))
    assert ws.ngram.stat().st_mtime_ns == before
    zen("lexicon", "--workdir", str(ws.root), "--overwrite", "--workers", "1")
    assert ws.ngram.read_text(encoding="utf-8").splitlines() == ngrams
    # the group's subcommands are unchanged; the bare command's options do not go before them
    assert f"{len(ngrams):,} n-grams" in zen("lexicon", "show", str(ws.ngram))
    assert "belong to bare `zen lexicon`" in error("lexicon", "--workdir", str(ws.root), "show", str(ws.ngram))
    assert "Usage" in zen("lexicon", "--help") and "build" in zen("lexicon", "--help")


def test_pretrain_defaults_are_the_tiny_recipe_on_the_workspace_lexicon(tmp_path, data):
    from zencli.jobs.pretrain import build_config, uses_workspace, workspace_config

    ws = Workspace.at(tmp_path / "ws")
    zen("lexicon", "--workdir", str(ws.root), "--workers", "1")
    cfg = workspace_config(ws, [], {})
    tiny = build_config("pretrain-zh-tiny", [], {})
    assert cfg.data.vocab == ws.vocab and cfg.data.ngram == ws.ngram and not cfg.data.build_missing
    assert cfg.data.corpus == [data / "raw" / "train.txt"] and cfg.data.heldout == [data / "raw" / "dev.txt"]
    assert cfg.train.output_dir == ws.pretrain_dir
    assert cfg.train.max_minutes == STEP_MINUTES["pretrain_minutes"] == 6.75  # the quickstart's budget of the step
    assert workspace_config(ws, ["train.max_minutes=null"], {}).train.max_minutes is None
    assert (cfg.model, cfg.masking, cfg.train.lr, cfg.train.max_steps) == (tiny.model, tiny.masking, tiny.train.lr,
                                                                            tiny.train.max_steps)
    # what the user says still wins: --set, then the options
    cfg = workspace_config(ws, ["model.hidden_size=64", "data.heldout=[]"],
                           {"train.output_dir": tmp_path / "elsewhere", "train.max_minutes": 2.5})
    assert cfg.model.hidden_size == 64 and cfg.data.heldout == [] and cfg.train.output_dir == tmp_path / "elsewhere"
    assert cfg.train.max_minutes == 2.5
    # a recipe, or a corpus, vocab, lexicon or checkpoint of one's own, leaves the workspace out
    assert uses_workspace(None, []) and uses_workspace(None, ["data.heldout=[]", "model.hidden_size=64"])
    assert not uses_workspace("pretrain-zh-tiny", [])
    for key in ("data.corpus=[x.txt]", "data.vocab=v.txt", "data.ngram=n.txt", "init.pretrained=m"):
        assert not uses_workspace(None, [key])


def test_finetune_defaults_come_from_the_task_table_and_the_pretrained_model(tmp_path, data):
    from zencli.jobs.finetune import build_config, uses_workspace, workspace_config

    ws = Workspace.at(tmp_path / "ws")
    model = fake_pretrained(ws)
    cfg = workspace_config(ws, [], {"task.name": "ner"})
    recipe = build_config("finetune-pd98-ner", [], {})
    assert (cfg.data.train, cfg.data.dev, cfg.data.test) == tuple(data / "ner" / f"{s}.tsv"
                                                                  for s in ("train", "dev", "test"))
    assert cfg.model.pretrained == model and cfg.model.vocab is None and cfg.model.ngram is None
    assert cfg.train.output_dir == ws.finetune_dir("ner") and cfg.train.lr == "auto"  # the rule (zencli.tasks.transfer)
    assert cfg.train.max_minutes == STEP_MINUTES["finetune_minutes"] == 3.75  # the quickstart's budget of the step
    assert (cfg.task, cfg.epochs, cfg.train.batch_size) == (recipe.task, recipe.epochs, recipe.train.batch_size)
    cws = workspace_config(ws, ["task.name=cws"], {"model.pretrained": tmp_path / "other", "train.lr": 1e-4})
    assert cws.task.name == "cws" and cws.data.train == data / "cws" / "train.txt"
    assert cws.model.pretrained == tmp_path / "other" and cws.train.lr == 1e-4
    assert cws.train.output_dir == ws.finetune_dir("cws")
    assert set(TASK_DEFAULTS) == {"ner", "cws", "pos", "sa"}
    # naming data, or the vocab of a model from scratch, or a recipe, leaves the workspace out
    assert uses_workspace(None, [], {"task.name": "ner"})
    assert uses_workspace(None, ["train.lr=1e-4", "data.format=conll"], {"task.name": "ner"})
    assert not uses_workspace("finetune-pd98-ner", [], {"task.name": "ner"})
    assert not uses_workspace(None, [], {"task.name": "ner", "data.train": Path("x.tsv")})
    assert not uses_workspace(None, [], {"task.name": "ner", "model.vocab": Path("vocab.txt")})
    assert not uses_workspace(None, ["data.train=x.tsv"], {"task.name": "ner"})
    # a dataset directory without the task's files says which file
    (tmp_path / "partial" / "ner").mkdir(parents=True)
    (tmp_path / "partial" / "ner" / "train.tsv").write_text("x\tO\n\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"ner/dev\.tsv: not found; expected the pd98 dataset's dev file"):
        TASK_DEFAULTS["ner"].files(tmp_path / "partial")


def test_predict_model_argument_option_and_workspace(tmp_path):
    from zencli.cli.predict import resolve_model

    ws = Workspace.at(tmp_path)
    assert resolve_model(Path("m"), None, None) == Path("m") == resolve_model(None, Path("m"), None)
    assert resolve_model(Path("m"), Path("m"), None) == Path("m")
    with pytest.raises(ZenError, match="disagree"):
        resolve_model(Path("m"), Path("n"), None)
    with pytest.raises(ZenError, match="--workdir"):
        resolve_model(Path("m"), None, tmp_path)
    m = ws.finetuned_model("ner")
    m.mkdir(parents=True)
    (m / "task.json").write_text("{}", encoding="utf-8")
    assert resolve_model(None, None, tmp_path) == m
