"""Feature records → a padded batch of torch tensors whose keys are ZenModel.forward's arguments.

Each batch is padded to its own longest sequence L and its own largest slot count M, not to a fixed
maximum: with mixed lengths most of a fixed-size batch would be padding, and attention costs L².
(`length` / `n_slots` / `multiple_of` force a size, e.g. to compare with fixed-shape references or to
round L up for tensor cores.) So the last slot column is used by some row and a batch without any n-gram
has M = 0: on a GPU ZenModel relies on this instead of looking for trailing all-padding slots itself,
which would make the host wait for the device (forced extra slots are then computed, to no effect).

Padding: input_ids with `pad_id`, token types, masks and all n-gram slot columns with 0 (n-gram id 0 is
the padding row of the table, length 0 makes a slot cover nothing). Keys that are not model inputs are
labels or task data and pass through: per-token arrays are padded along their first axis with
`label_pad` (-100, the ignore index of the losses), scalars are stacked.

`bucket_batches` orders examples so that each batch holds similar lengths (less padding), shuffled
deterministically from a seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from zencli.data.features import SLOT_KEYS

IGNORE_INDEX = -100
MODEL_KEYS = (
    "input_ids",
    "token_type_ids",
    "attention_mask",
    "ngram_ids",
    "ngram_token_type_ids",
    "ngram_attention_mask",
    "ngram_starts",
    "ngram_lengths",
    "ngram_freqs",
)


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def _padded(arrays: Sequence[np.ndarray], lengths: np.ndarray, width: int, fill: int, dtype: np.dtype) -> np.ndarray:
    """[B, width, *trailing] with arrays[b] in row b (left-aligned), `fill` elsewhere. One copy, no loop."""
    trailing = arrays[0].shape[1:] if len(arrays) else ()
    out = np.full((len(arrays), width, *trailing), fill, dtype)
    if lengths.sum():
        out[np.arange(width)[None, :] < lengths[:, None]] = np.concatenate(arrays)
    return out


def collate(
    records: Sequence[Mapping[str, np.ndarray]],
    *,
    pad_id: int = 0,
    label_pad: int = IGNORE_INDEX,
    length: int | None = None,
    n_slots: int | None = None,
    multiple_of: int = 1,
) -> dict[str, torch.Tensor]:
    """Pad records (from `NgramFeaturizer`, plus label keys) into int64 tensors [B, L] / [B, M].

    `length` / `n_slots`: pad to exactly this many tokens / slots (must be >= the batch's longest);
    otherwise the batch's longest, rounded up to `multiple_of`. Records without n-gram keys (plain BERT)
    give no n-gram tensors.
    """
    if not records:
        raise ValueError("collate needs at least one record")
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be >= 1, got {multiple_of}")
    for i, r in enumerate(records):
        if set(r) != set(records[0]):
            raise ValueError(f"record {i} has keys {sorted(r)}, record 0 has {sorted(records[0])}")
    n_tok = np.fromiter((len(r["input_ids"]) for r in records), np.int64, len(records))
    L = _fixed_or_longest(n_tok, length, multiple_of, "length", "tokens")
    batch: dict[str, torch.Tensor] = {}
    ids = [r["input_ids"] for r in records]
    batch["input_ids"] = torch.from_numpy(_padded(ids, n_tok, L, pad_id, np.int64))
    if "token_type_ids" in records[0]:
        types = [r["token_type_ids"] for r in records]
        batch["token_type_ids"] = torch.from_numpy(_padded(types, n_tok, L, 0, np.int64))
    else:
        batch["token_type_ids"] = torch.zeros(len(records), L, dtype=torch.int64)
    batch["attention_mask"] = torch.from_numpy((np.arange(L)[None, :] < n_tok[:, None]).astype(np.int64))

    has_slots = "ngram_ids" in records[0]
    if has_slots:
        n_ng = np.fromiter((len(r["ngram_ids"]) for r in records), np.int64, len(records))
        M = _fixed_or_longest(n_ng, n_slots, multiple_of, "n_slots", "n-gram slots")
        for key in SLOT_KEYS:
            batch[key] = torch.from_numpy(_padded([r[key] for r in records], n_ng, M, 0, np.int64))
        batch["ngram_attention_mask"] = torch.from_numpy((np.arange(M)[None, :] < n_ng[:, None]).astype(np.int64))

    known = set(MODEL_KEYS)
    for key in records[0]:
        if key in known:
            continue
        batch[key] = _pass_through(key, [r[key] for r in records], label_pad, L, n_tok)
    return batch


def _fixed_or_longest(counts: np.ndarray, fixed: int | None, multiple_of: int, name: str, what: str) -> int:
    longest = int(counts.max())
    if fixed is None:
        return _round_up(longest, multiple_of)
    if fixed < longest:
        raise ValueError(f"{name}={fixed} but record {int(np.argmax(counts))} has {longest} {what}")
    return fixed


def _pass_through(key: str, values: list, label_pad: int, L: int, n_tok: np.ndarray) -> torch.Tensor:
    """Labels and other task data: stack scalars; pad arrays along their first axis with `label_pad`.

    An array as long as its record's input_ids is per-token: padded to L, so it lines up with the tokens
    even when `length` forces extra padding."""
    arrays = [np.asarray(v) for v in values]
    if all(a.ndim == 0 for a in arrays):
        return torch.from_numpy(np.stack(arrays))
    if any(a.ndim == 0 for a in arrays) or len({a.shape[1:] for a in arrays}) > 1:
        raise ValueError(f"key {key!r}: expected all scalars or arrays with equal trailing shapes")
    lens = np.fromiter((len(a) for a in arrays), np.int64, len(arrays))
    width = int(lens.max())
    if np.array_equal(lens, n_tok):
        width = L
    dtype = np.result_type(*arrays)
    if dtype.kind not in "iufb":
        raise ValueError(f"key {key!r}: expected numeric arrays, got dtype {dtype}")
    if dtype.kind in "ub":  # -100 must fit
        dtype = np.dtype(np.int64)
    if dtype.kind == "i":
        dtype = np.dtype(np.int64)
    return torch.from_numpy(_padded(arrays, lens, width, label_pad, dtype))


def bucket_batches(
    lengths: Sequence[int] | np.ndarray,
    batch_size: int,
    *,
    seed: int,
    chunk_batches: int = 50,
    drop_last: bool = False,
) -> list[np.ndarray]:
    """Index batches with little padding: shuffle (seeded), cut into chunks of `chunk_batches` batches,
    sort each chunk by length, cut it into batches, then shuffle the batch order.

    Sorting within a chunk rather than globally keeps batches random enough for SGD while most of the
    padding goes away. Same seed → same batches. `drop_last` drops the one short batch, if any.
    """
    if batch_size < 1 or chunk_batches < 1:
        raise ValueError(f"batch_size and chunk_batches must be >= 1, got {batch_size}, {chunk_batches}")
    lengths = np.asarray(lengths, dtype=np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    chunk = batch_size * chunk_batches
    batches: list[np.ndarray] = []
    for c0 in range(0, len(order), chunk):
        part = order[c0 : c0 + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    if drop_last:
        batches = [x for x in batches if len(x) == batch_size]
    perm = rng.permutation(len(batches))
    return [batches[i] for i in perm]
