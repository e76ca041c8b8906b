"""Named-entity scores: exact (start, end, type) chunks, micro P/R/F1 overall and per type.

Three tagging schemes are read: IOB2 (`B- I- O`), IOBES (`B- I- E- S- O`) and BMES (`B- M- E- S- O`,
where `M-` is IOBES's `I-`). Chunks are extracted strictly by `zencli.text.labels.spans_from_labels`,
the way seqeval's strict mode does:

- IOB2: a chunk is `B-X` followed by the longest run of `I-X`. An `I-X` that does not continue a
  chunk of type X starts nothing.
- IOBES/BMES: a chunk is `S-X`, or `B-X (I-X)* E-X`. A `B-X` whose run is not closed by `E-X`
  (interrupted, or ending the sentence), a stray `I-X`/`E-X`, or a change of type inside yields no
  chunk at all.

So an ill-formed prediction (`O M-PER E-PER`, `B-PER I-LOC`) is never repaired into an entity; the
labels left outside every chunk are counted as `orphan_labels` so a scheme mismatch stays visible.
Gold and prediction are read in one scheme, decided from the gold labels (see `detect_scheme`).

`chunking="conlleval"` (word-level NER, the CoNLL shared tasks' scorer `conlleval.pl`) reads chunks the
way conlleval does instead: an `I-X` (or `E-X`) after `O`, after a chunk's end or after another type
starts a chunk, so IOB1 files and stray `I-` labels count as entities; every non-`O` label lies in a chunk.
conlleval knows no `S-` and merges `E-X B-X`; here `S-X` is a chunk of its own and `E-`/`S-` always close
one, which is what conlleval gives on the same entities written in IOB2 (the conversion the spec asks
for). It also reports token accuracy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zencli.errors import ZenError
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, check_sentence_counts, prf_row
from zencli.text.labels import (
    SCHEME_PREFIXES,
    Span,
    parse_entity_label,
    scheme_name,
    scheme_of_prefixes,
    spans_from_labels,
)
from zencli.text.labels import Scheme as Canonical

# Reported under the names seqeval and the published scores use (IOB2 for BIO).
Scheme = Literal["IOB2", "IOBES", "BMES"]
_REPORTED: dict[Canonical, Scheme] = {"BIO": "IOB2", "IOBES": "IOBES", "BMES": "BMES"}
SCHEMES: tuple[Scheme, ...] = tuple(_REPORTED.values())


def _prefixes(sequences: Sequence[Sequence[str]], name: str) -> set[str]:
    """The prefixes used; a ZenError names the first label (in file order) that is not an NER label."""
    distinct: set[str] = set()
    for seq in sequences:
        distinct.update(seq)
    found: set[str] = set()
    bad: set[str] = set()
    for label in distinct:
        try:
            found.add(parse_entity_label(label)[0])
        except ValueError:
            bad.add(label)
    if bad:
        i, j, label = next((i, j, x) for i, seq in enumerate(sequences) for j, x in enumerate(seq) if x in bad)
        raise ZenError(f"{name}: sentence {i + 1}, token {j + 1}: label {label!r} is not a NER label; "
                       f"expected O or B-/I-/M-/E-/S- followed by an entity type")
    return found


def _scheme_of(prefixes: set[str], name: str) -> Canonical | None:
    try:
        return scheme_of_prefixes(prefixes)
    except ValueError as e:
        raise ZenError(f"{name}: {e}") from None


def _extra_prefixes(prefixes: set[str], scheme: Canonical) -> str:
    """The prefixes `scheme` lacks, as `E-, S-` ("" when none)."""
    return ", ".join(sorted(p + "-" for p in prefixes - SCHEME_PREFIXES[scheme]))


def detect_scheme(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]] = (),
    *,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> Scheme:
    """The scheme both sides are read in, decided by the gold labels.

    `M-` means BMES, otherwise `E-`/`S-` mean IOBES, otherwise IOB2. A gold side with only `O` defers
    to the prediction. A gold IOBES file that happens to have no `I-` is BMES when the prediction
    uses `M-` (its short entities read the same in both). Any other prediction prefix outside the
    gold scheme is an error: reading one side in a scheme it was not written in would silently
    break its chunks. A side that mixes `I-` and `M-` is an error too.
    """
    gp = _prefixes(gold, gold_name)
    pp = _prefixes(pred, pred_name)
    gold_scheme = _scheme_of(gp, gold_name)
    pred_scheme = _scheme_of(pp, pred_name)
    scheme = gold_scheme or pred_scheme or "BIO"
    if scheme == "IOBES" and "M" in pp and "I" not in gp:
        scheme = "BMES"
    extra = _extra_prefixes(pp, scheme)
    if extra:
        raise ZenError(f"{pred_name}: uses {extra} labels, which the {_REPORTED[scheme]} scheme of {gold_name} "
                       f"does not have; expected both files in the same tagging scheme")
    return _REPORTED[scheme]


def conlleval_spans(labels: Sequence[str]) -> list[Span]:
    """Chunks (start, end, type) of one sentence read as conlleval reads them (module docstring);
    `M-` counts as `I-`. The sentence end closes the open chunk."""
    spans: list[Span] = []
    start, etype, prev = -1, "", "O"
    for i, label in enumerate(labels):
        tag, t = parse_entity_label(label)
        tag = "I" if tag == "M" else tag
        if start >= 0 and (prev in ("E", "S") or tag in ("B", "S", "O") or t != etype):
            spans.append((start, i, etype))
            start = -1
        if tag != "O" and start < 0:
            start, etype = i, t
        prev = tag
    if start >= 0:
        spans.append((start, len(labels), etype))
    return spans


def _orphans(labels: Sequence[str], spans: Sequence[Span]) -> int:
    covered = sum(end - start for start, end, _ in spans)
    return sum(label != "O" for label in labels) - covered


@dataclass(frozen=True)
class NerResult:
    overall: PRF
    per_type: dict[str, PRF]
    scheme: Scheme
    sentences: int
    gold_orphan_labels: int  # non-O gold labels outside every gold chunk (ill-formed gold)
    pred_orphan_labels: int  # the same for the prediction
    task: str = "ner"
    main: str = "f1"
    chunking: str = "strict"
    tokens: int = 0  # conlleval: labels scored, and how many the prediction got right
    tokens_correct: int = 0

    @property
    def main_score(self) -> float:
        return self.overall.f1

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"task": self.task, "main": self.main, "scheme": self.scheme,
                             "sentences": self.sentences}
        d.update(self.overall.to_dict())
        d["per_type"] = {t: prf.to_dict() for t, prf in self.per_type.items()}
        d["gold_orphan_labels"] = self.gold_orphan_labels
        d["pred_orphan_labels"] = self.pred_orphan_labels
        if self.chunking != "strict":
            d["chunking"] = self.chunking
            d["accuracy"] = self.tokens_correct / self.tokens if self.tokens else 0.0
            d["tokens"] = self.tokens
        return d

    def tables(self) -> list[Table]:
        rows = [prf_row(t, prf) for t, prf in self.per_type.items()]
        rows.append(prf_row("overall (micro)", self.overall))
        return [Table(f"Entities ({self.scheme}, {self.chunking})", PRF_COLUMNS, rows)]


def score_ner(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    *,
    scheme: str | None = None,
    gold_name: str = "gold",
    pred_name: str = "prediction",
    chunking: Literal["strict", "conlleval"] = "strict",
) -> NerResult:
    """Entity P/R/F1 of predicted label sequences against gold ones (one list of labels per sentence).

    `scheme=None` detects it (`detect_scheme`); an explicit scheme (IOB2/BIO, IOBES or BMES) still
    rejects labels outside it. `chunking`: how chunks are read (module docstring).
    """
    check_sentence_counts(gold, pred, gold_name, pred_name)
    if scheme is None:
        canonical = scheme_name(detect_scheme(gold, pred, gold_name=gold_name, pred_name=pred_name))
    else:
        try:
            canonical = scheme_name(scheme)
        except ValueError:
            raise ZenError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}") from None
        for seqs, name in ((gold, gold_name), (pred, pred_name)):
            extra = _extra_prefixes(_prefixes(seqs, name), canonical)
            if extra:
                raise ZenError(f"{name}: uses {extra} labels, which the {_REPORTED[canonical]} scheme does not have")
    correct: Counter[str] = Counter()
    n_gold: Counter[str] = Counter()
    n_pred: Counter[str] = Counter()
    gold_orphans = pred_orphans = 0
    tokens = tokens_correct = 0
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ZenError(f"{pred_name}: sentence {i + 1} has {len(p)} labels but {gold_name} has {len(g)}; "
                           f"expected one label per token")
        if chunking == "conlleval":
            g_spans, p_spans = conlleval_spans(g), conlleval_spans(p)
            tokens += len(g)
            tokens_correct += sum(a == b for a, b in zip(g, p))
        else:
            g_spans = spans_from_labels(g, canonical)
            p_spans = spans_from_labels(p, canonical)
        gold_orphans += _orphans(g, g_spans)
        pred_orphans += _orphans(p, p_spans)
        n_gold.update(t for _, _, t in g_spans)
        n_pred.update(t for _, _, t in p_spans)
        correct.update(t for _, _, t in set(g_spans) & set(p_spans))
    types = sorted(set(n_gold) | set(n_pred))
    per_type = {t: PRF(correct[t], n_pred[t], n_gold[t]) for t in types}
    overall = PRF(sum(correct.values()), sum(n_pred.values()), sum(n_gold.values()))
    return NerResult(overall, per_type, _REPORTED[canonical], len(gold), gold_orphans, pred_orphans,
                     chunking=chunking, tokens=tokens, tokens_correct=tokens_correct)
