"""Named-entity scores: exact (start, end, type) chunks, micro P/R/F1 overall and per type.

Three tagging schemes are read: IOB2 (`B- I- O`), IOBES (`B- I- E- S- O`) and BMES (`B- M- E- S- O`,
where `M-` is IOBES's `I-`). Chunks are extracted strictly, the way seqeval's strict mode does:

- IOB2: a chunk is `B-X` followed by the longest run of `I-X`. An `I-X` that does not continue a
  chunk of type X starts nothing.
- IOBES/BMES: a chunk is `S-X`, or `B-X (I-X)* E-X`. A `B-X` whose run is not closed by `E-X`
  (interrupted, or ending the sentence), a stray `I-X`/`E-X`, or a change of type inside yields no
  chunk at all.

So an ill-formed prediction (`O M-PER E-PER`, `B-PER I-LOC`) is never repaired into an entity; the
labels left outside every chunk are counted as `orphan_labels` so a scheme mismatch stays visible.
Gold and prediction are read in one scheme, decided from the gold labels (see `detect_scheme`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from zencli.errors import ZenError
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, prf_row

Scheme = Literal["IOB2", "IOBES", "BMES"]
SCHEMES: dict[str, frozenset[str]] = {
    "IOB2": frozenset("BIO"),
    "IOBES": frozenset("BIESO"),
    "BMES": frozenset("BMESO"),
}

Span = tuple[int, int, str]  # [start, end) and entity type


def parse_label(label: str) -> tuple[str, str]:
    """`B-PER` -> ('B', 'PER'); `O` -> ('O', ''). Raises ValueError on anything else."""
    if label == "O":
        return "O", ""
    if len(label) > 2 and label[1] == "-" and label[0] in "BIMES":
        return label[0], label[2:]
    raise ValueError(label)


def _prefixes(sequences: Iterable[Sequence[str]], name: str) -> set[str]:
    found: set[str] = set()
    for i, seq in enumerate(sequences):
        for j, label in enumerate(seq):
            try:
                found.add(parse_label(label)[0])
            except ValueError:
                raise ZenError(
                    f"{name}: sentence {i + 1}, token {j + 1}: label {label!r} is not a NER label; "
                    f"expected O or B-/I-/M-/E-/S- followed by an entity type"
                ) from None
    return found


def _scheme_of(prefixes: set[str]) -> Scheme | None:
    if "M" in prefixes:
        return "BMES"
    if prefixes & {"E", "S"}:
        return "IOBES"
    if prefixes & {"B", "I"}:
        return "IOB2"
    return None  # only O: says nothing


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
    for prefixes, name in ((gp, gold_name), (pp, pred_name)):
        if {"I", "M"} <= prefixes:
            raise ZenError(f"{name}: mixes I- and M- labels; expected one scheme (IOB2, IOBES or BMES)")
    scheme = _scheme_of(gp) or _scheme_of(pp) or "IOB2"
    if scheme == "IOBES" and "M" in pp and "I" not in gp:
        scheme = "BMES"
    extra = pp - SCHEMES[scheme]
    if extra:
        raise ZenError(
            f"{pred_name}: uses {', '.join(sorted(p + '-' for p in extra))} labels, which the {scheme} scheme "
            f"of {gold_name} does not have; expected both files in the same tagging scheme"
        )
    return scheme


def extract_entities(labels: Sequence[str], scheme: Scheme) -> list[Span]:
    """Strict chunks of one sentence as (start, end, type) with `end` exclusive."""
    parsed = [parse_label(label) for label in labels]
    n = len(parsed)
    spans: list[Span] = []
    i = 0
    if scheme == "IOB2":
        while i < n:
            prefix, typ = parsed[i]
            if prefix != "B":
                i += 1
                continue
            j = i + 1
            while j < n and parsed[j] == ("I", typ):
                j += 1
            spans.append((i, j, typ))
            i = j
        return spans
    inside = "M" if scheme == "BMES" else "I"
    while i < n:
        prefix, typ = parsed[i]
        if prefix == "S":
            spans.append((i, i + 1, typ))
            i += 1
        elif prefix == "B":
            j = i + 1
            while j < n and parsed[j] == (inside, typ):
                j += 1
            if j < n and parsed[j] == ("E", typ):
                spans.append((i, j + 1, typ))
                j += 1
            # Not closed by E-X: no chunk; the label at j may start the next one.
            i = j
        else:
            i += 1
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
        return d

    def tables(self) -> list[Table]:
        rows = [prf_row(t, prf) for t, prf in self.per_type.items()]
        rows.append(prf_row("overall (micro)", self.overall))
        return [Table(f"Entities ({self.scheme}, strict)", PRF_COLUMNS, rows)]


def score_ner(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    *,
    scheme: Scheme | None = None,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> NerResult:
    """Entity P/R/F1 of predicted label sequences against gold ones (one list of labels per sentence).

    `scheme=None` detects it (`detect_scheme`); an explicit scheme still rejects labels outside it.
    """
    if len(gold) != len(pred):
        raise ZenError(f"{pred_name} has {len(pred)} sentences but {gold_name} has {len(gold)}; "
                       f"expected one predicted sentence per gold sentence")
    if scheme is None:
        scheme = detect_scheme(gold, pred, gold_name=gold_name, pred_name=pred_name)
    elif scheme not in SCHEMES:
        raise ZenError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    else:
        for seqs, name in ((gold, gold_name), (pred, pred_name)):
            extra = _prefixes(seqs, name) - SCHEMES[scheme]
            if extra:
                raise ZenError(f"{name}: uses {', '.join(sorted(p + '-' for p in extra))} labels, "
                               f"which the {scheme} scheme does not have")
    correct: Counter[str] = Counter()
    n_gold: Counter[str] = Counter()
    n_pred: Counter[str] = Counter()
    gold_orphans = pred_orphans = 0
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ZenError(f"{pred_name}: sentence {i + 1} has {len(p)} labels but {gold_name} has {len(g)}; "
                           f"expected one label per token")
        g_spans = extract_entities(g, scheme)
        p_spans = extract_entities(p, scheme)
        gold_orphans += _orphans(g, g_spans)
        pred_orphans += _orphans(p, p_spans)
        n_gold.update(t for _, _, t in g_spans)
        n_pred.update(t for _, _, t in p_spans)
        correct.update(t for _, _, t in set(g_spans) & set(p_spans))
    types = sorted(set(n_gold) | set(n_pred))
    per_type = {t: PRF(correct[t], n_pred[t], n_gold[t]) for t in types}
    overall = PRF(sum(correct.values()), sum(n_pred.values()), sum(n_gold.values()))
    return NerResult(overall, per_type, scheme, len(gold), gold_orphans, pred_orphans)
