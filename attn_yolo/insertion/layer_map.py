"""Which base layer each layer of an inserted model is (``layer_map``): the map that carries weights by layer."""

from __future__ import annotations

from attn_yolo.insertion import inner
from attn_yolo.insertion.base import InsertionError, model_rows, row_targets
from attn_yolo.registry import canonical


def _same_row(a: list, b: list) -> bool:
    return (a[1] == b[1] and a[2] == b[2] and a[3] == b[3]) or inner.replaces(a, b)


def layer_map(base: dict, new: dict, names: tuple[str, str] = ("base", "model")) -> dict[int, int]:
    """Map each base layer index to its index in ``new``, a model dict made by inserting attention blocks into ``base``.

    Rows must appear in the same order with equal repeats, module and args (or the base's C2f / C3k2 / SPPF renamed
    to a block with attention inside, ``C3k2_CBAM``, same args before X's mapping); the extra rows of ``new`` must be
    attention blocks (``attn_yolo.MODULES`` or an alias), and each row's ``from`` must reach the mapped layer or a
    block chained right after it.

    Args:
        names: what the messages call ``base`` and ``new`` (``("checkpoint", "model")`` where the base is the
            checkpoint whose weights are carried).

    Raises:
        InsertionError: naming the first row that breaks this, each row by the side it belongs to.
    """
    b, n = names
    br, nr = model_rows(base), model_rows(new)
    m, j = {}, 0
    for i, row in enumerate(br):
        while j < len(nr) and not _same_row(row, nr[j]):
            if canonical(nr[j][2]) is None:
                raise InsertionError(
                    f"{b} row {i} {row[1:]} is not where the {n} has it: {n} row {j} is {nr[j][1:]}, neither that "
                    f"row nor an inserted attention block, so the {n} is not the {b} with blocks inserted"
                )
            j += 1
        if j == len(nr):
            raise InsertionError(f"{b} row {i} {row[1:]} has no match in the {n}: not the {b} with blocks inserted")
        m[i], j = j, j + 1
    if j != len(nr):
        raise InsertionError(f"{n} rows {j}..{len(nr) - 1} follow the {b}'s last layer (Detect)")
    inserted = set(range(len(nr))) - set(m.values())
    for i, row in enumerate(br[1:], 1):
        ts, tns = row_targets(row[0], i), row_targets(nr[m[i]][0], m[i])
        if len(ts) != len(tns):
            raise InsertionError(f"{n} row {m[i]} reads {len(tns)} layers, {b} row {i} reads {len(ts)}")
        for t, tn in zip(ts, tns):
            if not (tn == m[t] or (m[t] < tn and all(k in inserted for k in range(m[t] + 1, tn + 1)))):
                raise InsertionError(
                    f"{n} row {m[i]} reads layer {tn}, but {b} row {i} reads {b} layer {t} ({n} layer {m[t]})"
                )
    return m
