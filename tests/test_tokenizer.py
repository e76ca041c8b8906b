"""Tokenizer: BERT-compatible token strings, exact offsets into the original text, fast path == slow path."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zencli.errors import ZenError
from zencli.text.tokenizer import (
    CJK_RANGES,
    BasicTokenizer,
    Tokenizer,
    _tables,
    basic_tokenize,
    char_pieces,
    is_cjk,
    is_punctuation,
    is_removed,
    is_space,
    width_variants,
)
from zencli.text.vocab import SPECIAL_TOKENS, Vocab

# ---------------------------------------------------------------------------------------------------
# A literal, character-by-character transcription of Google BERT's tokenization.py (BasicTokenizer +
# WordpieceTokenizer), used as the oracle in property tests.


def _ref_is_chinese(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _ref_is_whitespace(c: str) -> bool:
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _ref_is_control(c: str) -> bool:
    return c not in "\t\n\r" and unicodedata.category(c).startswith("C")


def _ref_is_punct(c: str) -> bool:
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def ref_basic(text: str, lower: bool = True, strip: bool | None = None) -> list[str]:
    out = []
    for c in text:  # _clean_text
        cp = ord(c)
        if cp == 0 or cp == 0xFFFD or _ref_is_control(c):
            continue
        out.append(" " if _ref_is_whitespace(c) else c)
    text = "".join(out)
    text = "".join(f" {c} " if _ref_is_chinese(ord(c)) else c for c in text)  # _tokenize_chinese_chars
    split = []
    for tok in text.strip().split():
        if lower:
            tok = tok.lower()
        if (lower and strip is not False) or (not lower and strip):
            tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        words: list[list[str]] = []
        new = True
        for c in tok:  # _run_split_on_punc
            if _ref_is_punct(c):
                words.append([c])
                new = True
            else:
                if new:
                    words.append([])
                new = False
                words[-1].append(c)
        split.extend("".join(w) for w in words)
    return " ".join(split).strip().split()


def ref_wordpiece(tokens: list[str], vocab: set[str], max_chars: int = 100) -> list[str]:
    out = []
    for tok in tokens:
        chars = list(tok)
        if len(chars) > max_chars:
            out.append("[UNK]")
            continue
        start, sub, bad = 0, [], False
        while start < len(chars):
            end, cur = len(chars), None
            while start < end:
                s = "".join(chars[start:end])
                if start > 0:
                    s = "##" + s
                if s in vocab:
                    cur = s
                    break
                end -= 1
            if cur is None:
                bad = True
                break
            sub.append(cur)
            start = end
        out.extend(["[UNK]"] if bad else sub)
    return out


# ---------------------------------------------------------------------------------------------------


def _tok(tokens: list[str], **kw) -> Tokenizer:
    return Tokenizer(Vocab([*SPECIAL_TOKENS, *tokens]), **kw)


def test_hello_world_bert_chinese():
    tok = _tok(["hello", ",", "世", "界", "!"])
    assert tok.tokens("Hello,世界!") == ["hello", ",", "世", "界", "!"]
    assert [(t.text, t.start, t.end) for t in tok.tokenize("Hello,世界!")] == [
        ("hello", 0, 5),
        (",", 5, 6),
        ("世", 6, 7),
        ("界", 7, 8),
        ("!", 8, 9),
    ]
    assert tok.encode("Hello,世界!") == [5, 6, 7, 8, 9]


def test_basic_tokenizer_cases_from_bert():
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert basic_tokenize("H\u00e9llo") == ["hello"]
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ", lowercase=False) == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert basic_tokenize(" \tHäLLo!how  \n Are yoU?  ", lowercase=True, strip_accents=False) == [
        "hällo", "!", "how", "are", "you", "?"
    ]
    assert basic_tokenize(" \tHäLLo!how  \n Are yoU?  ", lowercase=False, strip_accents=True) == [
        "HaLLo", "!", "how", "Are", "yoU", "?"
    ]
    assert basic_tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    # Cleaning: NUL, U+FFFD and other controls vanish (joining what they separated); tabs/newlines split.
    assert basic_tokenize("a\x00b\ufffdc\u200bd e\tf\ng") == ["abcd", "e", "f", "g"]
    assert basic_tokenize("") == [] and basic_tokenize(" \u3000\t") == []


def test_wordpiece_greedy_longest_match_first():
    tok = _tok(["want", "##want", "##ed", "wa", "un", "runn", "##ing"])
    assert tok.tokens("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    # One uncoverable piece makes the whole word [UNK], spanning the whole word.
    assert tok.tokens("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert [(t.text, t.start, t.end) for t in tok.tokenize("unwantedX running")] == [
        ("[UNK]", 0, 9), ("runn", 10, 14), ("##ing", 14, 17)
    ]
    unwanted = [("un", 0, 2), ("##want", 2, 6), ("##ed", 6, 8)]
    assert [(t.text, t.start, t.end) for t in tok.tokenize("unwanted")] == unwanted
    assert tok.tokens("") == [] and tok.tokenize("") == [] and tok.encode("") == []


def test_unknown_cjk_char_is_unk_with_its_own_span():
    tok = _tok(["中"])
    toks = tok.tokenize("中文")
    assert [(t.text, t.id, t.start, t.end) for t in toks] == [("中", 5, 0, 1), ("[UNK]", 1, 1, 2)]
    assert tok.encode("中文") == [5, 1]


def test_max_chars_per_word():
    tok = _tok(["a", "##a"])
    assert tok.tokens("a" * 100) == ["a"] + ["##a"] * 99
    assert tok.tokens("a" * 101) == ["[UNK]"]
    assert [(t.text, t.start, t.end) for t in tok.tokenize("x " + "A" * 101)] == [("[UNK]", 0, 1), ("[UNK]", 2, 103)]
    assert char_pieces("a" * 101 + " b") == ["[UNK]", "b"]


def test_char_pieces():
    assert char_pieces("abc") == ["a", "##b", "##c"]
    assert char_pieces("Hello,世界! ２０２４年ＡＢ") == [
        "h", "##e", "##l", "##l", "##o", ",", "世", "界", "!", "２", "##０", "##２", "##４", "年", "ａ", "##ｂ"
    ]
    assert char_pieces("ＡＢ", lowercase=False) == ["Ａ", "##Ｂ"]
    assert char_pieces("「中」，x.y") == ["「", "中", "」", "，", "x", ".", "y"]


def test_offsets_point_into_the_original_text():
    tok = _tok(["ａ", "##ｂ", "##ｃ", "c", "##a", "##f", "##e", "i", "##s", "##t", "ας", "ab"])
    # Full-width letters lower-case to full-width letters: one char each.
    assert [(t.text, t.start, t.end) for t in tok.tokenize("ＡＢＣ")] == [("ａ", 0, 1), ("##ｂ", 1, 2), ("##ｃ", 2, 3)]
    # Precomposed é (1 code point) and decomposed e + U+0301 (2 code points): the mark belongs to its letter.
    assert [(t.start, t.end) for t in tok.tokenize("Café")] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert [(t.text, t.start, t.end) for t in tok.tokenize("Cafe\u0301 x")][-2] == ("##e", 3, 5)
    # İ lower-cases to two code points (i + combining dot) that accent stripping reduces to "i".
    assert [(t.text, t.start, t.end) for t in tok.tokenize("İst")] == [("i", 0, 1), ("##s", 1, 2), ("##t", 2, 3)]
    # Final sigma depends on context; the span still covers the original letters.
    assert [(t.text, t.start, t.end) for t in tok.tokenize("ΑΣ")] == [("ας", 0, 2)]
    # A removed control char inside a word is inside its span; leading/trailing ones are not.
    assert [(t.text, t.start, t.end) for t in tok.tokenize("\u200ba\x00b\u200b")] == [("ab", 1, 4)]


def test_offsets_surface_matches_token():
    tok = _tok(["hello", ",", "世", "界", "!", "wor", "##ld", "##２", "##０", "年"])
    text = "  HeLLo ,世界!\tWorld２０年 "
    assert tok.tokens(text) == ["hello", ",", "世", "界", "!", "wor", "##ld", "##２", "##０", "年"]
    for t in tok.tokenize(text):
        surface = text[t.start : t.end]
        if t.text.startswith("##"):
            assert surface.lower() == t.text[2:]
        else:
            assert surface.lower() == t.text


def test_cjk_compatibility_ideographs_normalised_only_when_stripping():
    tok = _tok(["\u8c48"])
    assert tok.tokens("\uf900") == ["\u8c48"]
    assert [(t.text, t.start, t.end) for t in tok.tokenize("a\uf900")][1] == ("\u8c48", 1, 2)
    assert _tok(["\u8c48"], lowercase=False).tokens("\uf900") == ["[UNK]"]
    assert _tok(["\uf900"], lowercase=False).tokens("\uf900") == ["\uf900"]
    # Unassigned code points inside the CJK blocks are removed like any unassigned code point.
    assert basic_tokenize("a\ufa6eb") == ["ab"]


def test_arabic_keeps_diacritics_unless_asked():
    word = "كَتَبَ"  # made up for the test: k-a-t-a-b-a with fatha marks
    assert basic_tokenize(word, lowercase=True, strip_accents=False) == [word]
    assert basic_tokenize(word, lowercase=True) == ["كتب"]
    assert char_pieces(word, strip_accents=False) == ["ك", "##\u064e", "##ت", "##\u064e", "##ب", "##\u064e"]
    tok = _tok(["كَ", "##تَبَ", "،"], strip_accents=False)
    assert [(t.text, t.start, t.end) for t in tok.tokenize(f"{word}، {word}")] == [
        ("كَ", 0, 2), ("##تَبَ", 2, 6), ("،", 6, 7), ("كَ", 8, 10), ("##تَبَ", 10, 14)
    ]


def test_tokenizer_needs_unk():
    with pytest.raises(ZenError, match=r"no \[UNK\]"):
        Tokenizer(Vocab(["[PAD]", "a"]))


# ---------------------------------------------------------------------------------------------------
# Property tests: fast path == offsets path == a transcription of BERT, on nasty random text.

_NASTY = (
    "中文字豈\uf900\ufa6e\u3400𠀀"  # CJK, compatibility, unassigned-in-block, ext A, ext B
    "ＡＢｃ１２，。！「」、"  # full-width forms and CJK punctuation
    "aBcXyz09 .,!?-#'\"[]`"  # ASCII
    "éÅİΣσßǅñ\u0301\u0323\u0308\u0345\u1fef\u037e"  # accents, combining marks (incl. non-Mn classes), Greek
    "كتب\u064e\u0650\u0651\u06d6،؟\u06dd"  # Arabic letters, diacritics, Quranic mark, punctuation, Cf
    " \t\n\r\u3000\xa0\u2028\x1c\x0b\x85"  # white space (some of which BERT removes as control)
    "\x00\x7f\u200b\u200d\ufeff\ufffd\ue000\U000e0001\ud800"  # controls, format, private use, surrogate
)
_text = st.text(alphabet=st.one_of(st.sampled_from(_NASTY), st.characters()), max_size=40)
_settings = [(True, None), (False, None), (True, False), (False, True)]
_VOCAB = [
    *SPECIAL_TOKENS,
    *{c for c in _NASTY if not c.isspace()},
    *{t for c in _NASTY for t in ref_basic(c)},
    *("##" + c for c in "abcxyz09ｃ１２تب\u064e"),
    "ab", "##bc", "xyz", "##xyz", "كت", "##ب\u064e",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_text, setting=st.sampled_from(_settings))
def test_basic_tokens_match_bert(text, setting):
    lower, strip = setting
    b = BasicTokenizer(lower, strip)
    expected = ref_basic(text, lower, strip)
    assert b.split(text) == expected
    assert [t.text for t in b.split_with_offsets(text)] == expected
    assert char_pieces(text, lower, strip) == [
        p for w in expected for p in (["[UNK]"] if len(w) > 100 else [w[0], *("##" + c for c in w[1:])])
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_text, setting=st.sampled_from(_settings))
def test_tokens_fast_equals_offsets_path_and_bert(text, setting):
    lower, strip = setting
    tok = Tokenizer(Vocab(dict.fromkeys(_VOCAB)), lowercase=lower, strip_accents=strip, width_fallback=False)
    expected = ref_wordpiece(ref_basic(text, lower, strip), set(_VOCAB))
    slow = tok.tokenize(text)
    assert tok.tokens(text) == expected
    assert [t.text for t in slow] == expected
    assert tok.encode(text) == [t.id for t in slow] == [tok.vocab.token_to_id(t) for t in expected]
    prev_start = 0
    for t in slow:
        assert 0 <= t.start < t.end <= len(text)
        assert t.start >= prev_start  # tokens come in text order
        prev_start = t.start
        # A token never covers white space (spans stay inside one word).
        assert not any(is_space(c) for c in text[t.start : t.end])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_text)
def test_basic_token_spans_reproduce_the_token(text):
    """Tokenizing a basic token's span on its own gives the token back (where lower-casing cannot
    depend on context: Greek final sigma looks past the span)."""
    b = BasicTokenizer()
    for t in b.split_with_offsets(text):
        surface = text[t.start : t.end]
        if "Σ" in surface:
            continue
        assert "".join(basic_tokenize(surface)) == t.text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_text)
def test_char_pieces_is_tokenizer_with_complete_char_vocab(text):
    pieces = char_pieces(text)
    tok = Tokenizer(Vocab(dict.fromkeys([*SPECIAL_TOKENS, *pieces])))
    assert tok.tokens(text) == pieces


def test_character_tables_agree_with_bert_definitions():
    """The regexes of the fast path, built from category runs, against BERT's per-character rules: on
    the whole BMP, and beyond it on both sides of every change of category and at the CJK block ends
    (regex classes are unions of ranges, so this covers every code point)."""
    t = _tables()
    cats = list(map(unicodedata.category, map(chr, range(0x110000))))
    points = list(range(0x10000))
    changes = [cp for cp in range(0x10000, 0x110000) if cats[cp] != cats[cp - 1]]
    points += [*changes, *(cp - 1 for cp in changes), 0x10000, 0x10FFFF]
    points += [b for lo, hi in CJK_RANGES for b in (lo - 1, lo, hi, hi + 1) if b >= 0x10000]
    points = sorted(set(points))
    text = "".join(map(chr, points))

    def ref_removed(cp: int) -> bool:
        return cp in (0, 0xFFFD) or (cats[cp][0] == "C" and cp not in (9, 10, 13))

    removed = [ref_removed(cp) for cp in points]
    punct = [_ref_is_punct(chr(cp)) for cp in points]
    kind = [
        "cjk" if _ref_is_chinese(cp) and not r else "space" if chr(cp).isspace() and not r else "word"
        for cp, r in zip(points, removed)
    ]

    got_removed = [False] * len(points)
    for m in t.removed.finditer(text):
        got_removed[m.start()] = True
    assert got_removed == removed
    got_kind = ["space"] * len(points)
    for m in t.segment.finditer(text):
        got_kind[m.start() : m.end()] = ["cjk" if m.group(1) else "word"] * (m.end() - m.start())
    assert got_kind == kind
    for m in t.punct_split.finditer(text):
        if m.end() - m.start() > 1:
            assert not any(punct[m.start() : m.end()]), hex(points[m.start()])
        elif not punct[m.start()]:  # a lone non-punctuation char must sit between punctuation chars
            assert punct[m.start() - 1] and (m.end() == len(text) or punct[m.end()]), hex(points[m.start()])
    # The per-character functions used on the offsets path.
    for i, cp in enumerate(points):
        c = chr(cp)
        assert is_removed(c) == removed[i] and is_punctuation(c) == punct[i], hex(cp)
        assert is_space(c) == (kind[i] == "space") and is_cjk(c) == (kind[i] == "cjk"), hex(cp)


def test_a_word_unknown_in_one_width_is_read_in_the_other():
    """A vocabulary of full-width text (PD98) reads half-width digits, letters and punctuation, and the
    reverse; spans stay the original characters'. BERT's semantics without the fallback: [UNK]."""
    vocab = Vocab([*SPECIAL_TOKENS, "２", "##０", "##２", "##４", "年", "，", "ｃ", "##ｐ", "##ｕ", "ok", "!"])
    text = "2024年,CPU ｏｋ！ 2x"
    tok = Tokenizer(vocab)
    assert tok.tokens(text) == ["２", "##０", "##２", "##４", "年", "，", "ｃ", "##ｐ", "##ｕ", "ok", "!", "[UNK]"]
    spans = [(t.text, text[t.start:t.end]) for t in tok.tokenize(text)]
    assert spans == [("２", "2"), ("##０", "0"), ("##２", "2"), ("##４", "4"), ("年", "年"), ("，", ","), ("ｃ", "C"),
                     ("##ｐ", "P"), ("##ｕ", "U"), ("ok", "ｏｋ"), ("!", "！"), ("[UNK]", "2x")]
    assert tok.encode(text) == [t.id for t in tok.tokenize(text)]
    bert = Tokenizer(vocab, width_fallback=False)
    assert bert.tokens(text) == ["[UNK]", "年", "[UNK]", "[UNK]", "[UNK]", "[UNK]", "[UNK]"]
    assert width_variants("Ａb") == ["Ａｂ", "Ab"] and width_variants("中") == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_text, max_size=4), setting=st.sampled_from(_settings), long_word=st.booleans())
def test_char_piece_counts_are_the_counts_of_char_pieces(lines, setting, long_word):
    """The vocabulary's counting (characters and words counted at once, lines joined by newlines) counts what
    char_pieces gives line by line."""
    from collections import Counter

    lower, strip = setting
    b = BasicTokenizer(lower, strip)
    if long_word:
        lines = [*lines, "x" * 101 + " ab"]  # a word over 100 chars: [UNK]
    expected = Counter(p for line in lines for p in b.char_pieces(line))
    assert b.char_piece_counts("\n".join(lines)) == expected
