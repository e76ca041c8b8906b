"""Arabic end to end through the CLI: `pretrain-ar-tiny` (with Arabic normalisation) for a few steps on
made-up Arabic text →
`finetune-ar-tiny-ner` on word-level CoNLL → `zen evaluate` → `zen predict` in all three formats.
Everything is shrunk by `--set` (a 2-layer 32-wide model, a 90-piece WordPiece vocabulary, so words split
into several pieces), so the chain runs in seconds; the text is nonsense words in Arabic script, written
for this test."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zencli.cli.app import app

runner = CliRunner()

_RNG = random.Random(11)
_LETTERS = [chr(c) for c in range(0x0628, 0x063B)] + [chr(c) for c in range(0x0641, 0x064B)]


def _word(n: int) -> str:
    return "".join(_RNG.choice(_LETTERS) for _ in range(n))


COMMON = [_word(_RNG.choice([2, 3, 3, 4])) for _ in range(30)]
PERSONS = [_word(4) for _ in range(6)]
PLACES = ["ال" + _word(4) for _ in range(5)]


def sentence(rng: random.Random) -> tuple[list[str], list[str]]:
    words, labels = [], []
    for _ in range(rng.randint(4, 8)):
        r = rng.random()
        if r < 0.15:
            words += [rng.choice(PERSONS), rng.choice(PERSONS)]
            labels += ["B-PER", "I-PER"]
        elif r < 0.25:
            words.append(rng.choice(PLACES))
            labels.append("B-LOC")
        else:
            words.append(rng.choice(COMMON))
            labels.append("O")
    return [*words, "."], [*labels, "O"]


def conll(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    path.write_text("".join("".join(f"{w}\t{t}\n" for w, t in zip(*sentence(rng))) + "\n" for _ in range(n)),
                    encoding="utf-8")
    return path


def zen(*args: str, input: str | None = None) -> str:
    r = runner.invoke(app, list(args), input=input, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    # predict and evaluate write data to stdout (stderr says which dtype `auto` picked)
    return r.stdout if args[0] in ("predict", "evaluate") else r.output


PRETRAIN = ["data.normalize=[diacritics,tatweel,alef,yaa]", "data.vocab_size=90", "data.ngram_min_freq=3",
            "data.ngram_min_pmi=1", "data.dupe_factor=1",
            "train.max_steps=3", "train.warmup_steps=1", "train.save_every=0", "train.log_every=1",
            "model.hidden_size=32", "model.num_hidden_layers=2", "model.num_attention_heads=2",
            "model.intermediate_size=64", "model.num_hidden_word_layers=1"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> Path:
    """`pretrain-ar-tiny`, shrunk, on 200 made-up lines: the model directory."""
    tmp = tmp_path_factory.mktemp("pretrain-ar")
    rng = random.Random(1)
    corpus = tmp / "corpus.txt"
    corpus.write_text("".join(" ".join(sentence(rng)[0]) + "\n" for _ in range(200)), encoding="utf-8")
    zen("pretrain", "-r", "pretrain-ar-tiny", "--quiet", "-o", str(tmp / "pre"), "--set", f"data.corpus=[{corpus}]",
        *[x for s in PRETRAIN for x in ("--set", s)])
    return tmp / "pre" / "model"


def test_pretrain_ar_tiny_then_word_level_ner_finetune_evaluate_and_predict(tmp_path, pretrained):
    model = pretrained
    assert json.loads((model / "vocab.json").read_text(encoding="utf-8"))["language"] == "ar"

    train, dev, test = (conll(tmp_path / f"{n}.txt", k, s) for n, k, s in (("train", 40, 2), ("dev", 10, 3),
                                                                         ("test", 10, 4)))
    out = tmp_path / "ft"
    log = zen("finetune", "-r", "finetune-ar-tiny-ner", "--model", str(model), "--train", str(train), "--dev",
              str(dev), "--test", str(test), "-o", str(out), "--max-steps", "6", "--batch-size", "8",
              "--set", "train.eval_every=3")
    assert "conlleval" in log
    per_word = float(re.search(r"\(([0-9.]+) per word", log)[1])
    assert per_word > 1.2  # the 90-piece vocabulary splits most words: the first-piece path is exercised
    task = json.loads((out / "model" / "task.json").read_text(encoding="utf-8"))
    assert task["state"]["level"] == "word" and task["state"]["scheme"] == "BIO"
    assert task["inputs"]["normalize"] == ["diacritics", "tatweel", "alef", "yaa"]  # from the vocab, kept
    test_scores = json.loads((out / "model" / "test_scores.json").read_text(encoding="utf-8"))

    scores = tmp_path / "scores.json"
    zen("evaluate", str(out / "model"), "--data", str(test), "--json", str(scores))
    ev = json.loads(scores.read_text(encoding="utf-8"))
    assert ev["gold_format"] == "conll-word" and ev["chunking"] == "conlleval"
    n_words = sum(1 for x in test.read_text(encoding="utf-8").splitlines() if x)
    assert ev["tokens"] == n_words and ev["f1"] == test_scores["f1"]

    line = f"  {PERSONS[0]}ُ {PERSONS[1]}، في {PLACES[0]}ـ."  # a diacritic, a comma, a tatweel, a full stop
    text = zen("predict", str(out / "model"), "--format", "json", input=line + "\n\n")
    first, empty = (json.loads(x) for x in text.splitlines())
    assert first["text"] == line and empty == {"text": "", "words": [], "entities": []}
    assert [w["text"] for w in first["words"]] == [f"{PERSONS[0]}ُ", PERSONS[1], "،", "في", f"{PLACES[0]}ـ", "."]
    assert all(line[w["start"]:w["end"]] == w["text"] for w in first["words"])
    assert all(line[e["start"]:e["end"]] == e["text"] for e in first["entities"])
    rows = zen("predict", str(out / "model"), "--format", "conll", input=line + "\n").splitlines()
    assert rows[-1] == "" and [r.split("\t")[0] for r in rows[:-1]] == [w["text"] for w in first["words"]]
    assert [r.split("\t")[1] for r in rows[:-1]] == [w["label"] for w in first["words"]]
    # The model reads the line normalised: the bare spelling gets the very same labels.
    bare = f"  {PERSONS[0]} {PERSONS[1]}، في {PLACES[0]}."
    again = json.loads(zen("predict", str(out / "model"), "--format", "json", input=bare + "\n"))
    assert [w["label"] for w in again["words"]] == [w["label"] for w in first["words"]]
    plain = zen("predict", str(out / "model"), input=line + "\n").rstrip("\n")
    assert plain.replace("[", "").replace("]", "").split("/")[0].startswith("  " + PERSONS[0])


FINETUNE = ["--max-steps", "3", "--batch-size", "4", "--quiet", "--set", "train.dtype=fp32",
            "--set", "train.num_threads=1", "--set", "task.max_seq_len=64"]


def test_sentiment_and_arabic_nli_pairs_run_on_the_arabic_model(tmp_path, pretrained):
    rng = random.Random(5)
    sa = tmp_path / "sa.tsv"
    sa.write_text("".join(f"{rng.choice('01')}\t{' '.join(sentence(rng)[0])}\n" for _ in range(16)), encoding="utf-8")
    zen("finetune", "--task", "sa", "--model", str(pretrained), "--train", str(sa), "--test", str(sa),
        "-o", str(tmp_path / "sa"), *FINETUNE)
    line = f"{PERSONS[0]}ُ قال: {COMMON[0]}ـ"
    out = zen("predict", str(tmp_path / "sa" / "model"), "--format", "json", input=line + "\n")
    assert json.loads(out)["label"] in ("0", "1")
    nli = tmp_path / "nli.tsv"
    labels = ["entailment", "neutral", "contradiction"]
    nli.write_text("".join(f"{' '.join(sentence(rng)[0])}\t{' '.join(sentence(rng)[0])}\t{rng.choice(labels)}\n"
                           for _ in range(16)), encoding="utf-8")
    zen("finetune", "--task", "nli", "--model", str(pretrained), "--train", str(nli), "--test", str(nli),
        "-o", str(tmp_path / "nli"), *FINETUNE)
    scores = json.loads((tmp_path / "nli" / "model" / "test_scores.json").read_text(encoding="utf-8"))
    assert scores["gold_format"] and 0 <= scores["main_score"] <= 1


def test_arabic_mrc_answers_are_exact_spans_of_the_original_context_with_diacritics(tmp_path, pretrained):
    # Every context word carries a diacritic (and some a tatweel) the normalising model never sees:
    # any answer the model picks must come back with them, cut from the original context.
    rng = random.Random(8)
    data = []
    for i in range(12):
        words = [w + "ـ" * (k % 3 == 0) + "َ" for k, w in enumerate(sentence(rng)[0][:-1])]
        context = " ".join(words) + "."
        k = rng.randrange(len(words))
        answer = words[k]
        data.append({"title": "t", "paragraphs": [{"context": context, "qas": [{
            "id": f"q{i}", "question": f"{COMMON[1]} {COMMON[2]}؟",
            "answers": [{"text": answer, "answer_start": context.index(answer)}]}]}]})
    squad = tmp_path / "ar-squad.json"
    squad.write_text(json.dumps({"version": "1.1", "data": data}, ensure_ascii=False), encoding="utf-8")
    zen("finetune", "--task", "mrc", "--model", str(pretrained), "--train", str(squad), "--test", str(squad),
        "-o", str(tmp_path / "mrc"), *FINETUNE, "--set", "task.metric=squad")
    lines = [json.dumps({"id": d["paragraphs"][0]["qas"][0]["id"], "question": d["paragraphs"][0]["qas"][0]["question"],
                         "context": d["paragraphs"][0]["context"]}, ensure_ascii=False) for d in data]
    out = [json.loads(x) for x in zen("predict", str(tmp_path / "mrc" / "model"), "--format", "json",
                                      input="\n".join(lines) + "\n").splitlines()]
    for d, o in zip(data, out):
        context = d["paragraphs"][0]["context"]
        assert o["answer"] and context[o["start"]:o["end"]] == o["answer"]
        # A span of word pieces never cuts a letter from its marks: what the model dropped stays with
        # the letter before it, so an answer ending a word ends with the word's tatweel and fatha.
        assert context[o["end"]:o["end"] + 1] not in ("َ", "ـ") and context[o["start"]] not in ("َ", "ـ")
        if context[o["end"]:o["end"] + 1] in (" ", "."):
            assert o["answer"].endswith("َ")
    # Scored with SQuAD v1.1's EM/F1 (the model's task.metric): the model's evaluation and its predictions
    # written out and scored as a file agree.
    model_scores = json.loads((tmp_path / "mrc" / "model" / "test_scores.json").read_text(encoding="utf-8"))
    assert model_scores["metric"] == "squad" and set(model_scores["official"]) == {"exact_match", "f1"}
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({o["id"]: o["answer"] for o in out}, ensure_ascii=False), encoding="utf-8")
    from_file = json.loads(zen("evaluate", "--task", "mrc", "--gold", str(squad), "--pred", str(pred), "--metric",
                               "squad", "--json", "-"))
    assert from_file["official"] == model_scores["official"] and from_file["total"] == 12
    cmrc = json.loads(zen("evaluate", str(tmp_path / "mrc" / "model"), "--data", str(squad), "--metric", "cmrc2018",
                          "--json", "-"))
    assert cmrc["metric"] == "cmrc2018" and "EM" in cmrc["official"]
