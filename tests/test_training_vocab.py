"""`model.extend_vocab` and the [UNK] warning: a made-up tiny vocabulary that lacks some characters of the
training data, what is found missing (chars, and WordPiece pieces of words), how the vocabulary and the
char table grow, and a whole `zen finetune` whose saved model predicts with the grown vocabulary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.conftest import write
from tests.test_pretrain_cli import error as cli_error
from zencli.cli.app import app
from zencli.config.finetune import TaskSection
from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.tasks.base import task_class
from zencli.tasks.inputs import InputSettings
from zencli.tasks.model_dir import load_task_model
from zencli.tasks.scoring import read_gold
from zencli.tasks.training_vocab import (
    Coverage,
    coverage,
    extend_vocab,
    grow_char_table,
    unk_warning,
)
from zencli.text.tokenizer import Tokenizer
from zencli.text.vocab import SPECIAL_TOKENS, Vocab

CHARS = ["我", "们", "在", "北", "京", "学", "习", "他", "是", "中", "国", "人", "##国", "a"]
# 她 ×3, 图 ×2, 书 ×1, 馆 ×1 are missing; "A" is read as the vocabulary's "a" (lower-cased)
NER = ("我\tO\n们\tO\n在\tO\n北\tB-LOC\n京\tE-LOC\nA\tO\n\n他\tS-PER\n是\tO\n中\tB-LOC\n国\tE-LOC\n人\tO\n\n"
       "她\tS-PER\n在\tO\n图\tB-LOC\n书\tM-LOC\n馆\tE-LOC\n\n她\tS-PER\n是\tO\n图\tO\n\n她\tS-PER\n")
TINY = ["--encoder", "bert", "--max-steps", "2", "--quiet", "--set", "model.hidden_size=8",
        "--set", "model.num_hidden_layers=1", "--set", "model.num_attention_heads=2",
        "--set", "model.intermediate_size=16", "--set", "train.batch_size=2", "--set", "train.device=cpu",
        "--set", "train.dtype=fp32", "--set", "train.num_threads=1", "--set", "train.tensorboard=false",
        "--set", "train.save_every=0", "--set", "task.max_seq_len=16"]
runner = CliRunner()


def _vocab(tokens=CHARS) -> Vocab:
    return Vocab([*SPECIAL_TOKENS, *tokens])


def _ner(tmp_path: Path):
    gold = read_gold(write(tmp_path / "ner.tsv", NER), "ner")
    return task_class("ner").from_training_data(TaskSection(name="ner"), gold), gold


def test_missing_chars_are_counted_and_added_most_frequent_first(tmp_path):
    task, gold = _ner(tmp_path)
    found = coverage(task, gold.examples, _vocab(), InputSettings())
    assert found is not None and found.unit == "characters"
    assert (found.total, found.unknown) == (20, 7)
    assert found.missing == Counter({"她": 3, "图": 2, "书": 1, "馆": 1})
    grown, added = extend_vocab(_vocab(), found, 2)
    assert added == ["她", "图"]
    assert grown.tokens[:len(_vocab())] == _vocab().tokens  # the pretrained ids are kept
    assert coverage(task, gold.examples, grown, InputSettings()).unknown == 2  # 书 and 馆: seen once


def test_a_char_is_added_in_the_form_it_is_looked_up(tmp_path):
    task, gold = _ner(tmp_path)
    found = coverage(task, gold.examples, _vocab([c for c in CHARS if c != "a"]), InputSettings(lowercase=True))
    assert found.missing["a"] == 1 and "A" not in found.missing
    cased = coverage(task, gold.examples, _vocab(), InputSettings(lowercase=False))
    assert cased.missing["A"] == 1


def test_word_pieces_spell_unknown_words_and_leave_known_ones_as_they_were():
    vocab = _vocab(["ab", "##c", "x"])

    class Words:  # a word-level task: each word goes through the tokenizer
        name = "pos"

        def vocab_units(self, examples):
            return "words", Counter(examples)

    words = ["abd", "abd", "abc", "x", "ya"]
    found = coverage(Words(), words, vocab, InputSettings())
    assert (found.unit, found.total, found.unknown) == ("words", 5, 3)
    # abd → a ##b ##d (each missing: the word had no spelling); ya → y ##a
    assert found.missing == Counter({"a": 2, "##b": 2, "##d": 2, "y": 1, "##a": 1})
    grown, added = extend_vocab(vocab, found, 2)
    assert set(added) == {"a", "##b", "##d"}
    tok = Tokenizer(grown)
    assert tok.tokens("abd") == ["ab", "##d"] and tok.tokens("abc") == ["ab", "##c"]  # abc: as before
    assert tok.tokens("ya") == ["[UNK]"]


def test_the_char_table_grows_with_the_other_forms_row_or_the_mean():
    vocab = _vocab()
    config = ZenConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=16, word_size=1, num_hidden_word_layers=0, encoder="bert")
    encoder = ZenModel(config)
    old = encoder.embeddings.char_embeddings.weight.detach().clone()
    grown = Vocab([*vocab.tokens, "她", "##中", "国"][:len(vocab) + 2])  # 她: no other form; ##中: 中's row
    grow_char_table(encoder, grown, len(vocab))
    table = encoder.embeddings.char_embeddings.weight.detach()
    assert table.shape == (len(vocab) + 2, 8) and encoder.config.vocab_size == len(vocab) + 2
    torch.testing.assert_close(table[:len(vocab)], old)
    torch.testing.assert_close(table[grown.get("她")], old.mean(0))
    torch.testing.assert_close(table[grown.get("##中")], old[vocab.get("中")])
    assert encoder(torch.tensor([[2, grown.get("她"), 3]])) is not None  # the new ids embed


def test_the_unk_warning_starts_above_two_percent_and_names_the_setting():
    def cov(unknown):
        return Coverage("words", 1000, unknown, Counter({"x": unknown}))

    assert unk_warning(cov(20), None) is None and unk_warning(None, None) is None
    text = unk_warning(cov(21), None)
    assert "21 of 1,000 training words (2.1%) start with [UNK]" in text and "model.extend_vocab" in text
    assert "model.extend_vocab: 5" in unk_warning(cov(100), 5)


def _finetune(tmp_path: Path, *args: str):
    data = write(tmp_path / "ner.tsv", NER)
    vocab = tmp_path / "vocab.txt"
    _vocab().save(vocab)
    return runner.invoke(app, ["finetune", "--task", "ner", "--train", str(data), "--dev", str(data),
                               "--vocab", str(vocab), "-o", str(tmp_path / "run"), *TINY, *args],
                         catch_exceptions=False)


def test_finetune_warns_without_the_setting_and_grows_the_saved_vocabulary_with_it(tmp_path, one_thread):
    r = _finetune(tmp_path)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "WARNING" in flat and "(35.0%) are [UNK]" in flat and "model.extend_vocab" in flat
    assert "plan: lr 0.001" in flat or "plan: lr 1e-3" in flat
    assert "never beat the majority baseline" in flat  # 2 steps of a new model: the end of the run says so
    r = _finetune(tmp_path, "--overwrite", "--set", "model.extend_vocab=2")
    assert r.exit_code == 0, r.output
    assert "2 tokens of the training data seen >= 2 times added" in " ".join(r.output.split())
    model = load_task_model(tmp_path / "run")
    assert model.inputs.vocab.tokens[-2:] == ["她", "图"] and model.model.encoder.config.vocab_size == 21
    ids = model.inputs.char_ids(list("她图书"))
    assert list(ids) == [19, 20, model.inputs.vocab.unk_id]


def test_extend_vocab_errors_name_the_key(tmp_path):
    data = write(tmp_path / "ner.tsv", NER)
    msg = cli_error("finetune", "--task", "ner", "--train", str(data), "--encoder", "chte", "-o",
                    str(tmp_path / "r"), "--quiet", "--set", "model.extend_vocab=2")
    assert msg.startswith("model.extend_vocab: CHTE from characters")
    msg = cli_error("finetune", "--task", "ner", "--train", str(data), "-o", str(tmp_path / "r"), "--quiet",
                    "--set", "model.extend_vocab=0")
    assert "extend_vocab" in msg and "expected a minimum count >= 1" in msg


@pytest.mark.parametrize("bad", ["two", "1.5"])
def test_a_non_integer_count_is_refused(tmp_path, bad):
    data = write(tmp_path / "ner.tsv", NER)
    msg = cli_error("finetune", "--task", "ner", "--train", str(data), "--quiet", "--set",
                    f"model.extend_vocab={bad}")
    assert "model.extend_vocab" in msg
