"""SPEC section 14's words (docs/drift.md): the content tokens whose share moved most between the
reference run and this one, from both runs' report/token_counts.parquet.

    r_t = (a_t + 0.5) / (m + 0.5 B),  c_t = (b_t + 0.5) / (n + 0.5 B)
    (a_t, b_t the token's counts, m, n the runs' sums of `count`, B the tokens counted in either run)
    moved_tokens: the MOVED tokens with the largest |ln(c_t / r_t)| among those counted at least
    MIN_COUNT times in either run, largest first, ties by token_id

It explains the drift, it is not a signal: no p-value (a text's tokens are not independent draws).
DuckDB sums each run's counts per token id (sql/drift/drift_token_counts.sql); the arithmetic is
numpy's, over one row per token of the vocabulary at most. Skipped (null, with the reason) when the
reference has no counts, or when a token id names different strings in the two runs (the
tokenizers differ).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scorekeeper.evaluation.duck import parquet_view, sql
from scorekeeper.metrics.document import MovedToken
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

MOVED = 20
MIN_COUNT = 20


def moved_tokens(con: Connection, reference: Location, current: Location) -> list[MovedToken] | str:
    """drift.moved_tokens of `current` against `reference`, or why there are none."""
    # this run's counts are still where the gather summed them (the report step publishes them)
    files = {"reference": RunFolder.TOKEN_COUNTS, "current": RunFolder.TOKEN_COUNTS_WORK}
    if current.exists(RunFolder.TOKEN_COUNTS):
        files["current"] = RunFolder.TOKEN_COUNTS
    missing = [side for side, run in (("reference", reference), ("current", current)) if not run.exists(files[side])]
    if missing:
        return f"the {' and the '.join(missing)} run has no {RunFolder.TOKEN_COUNTS} (written before SPEC section 14)"
    parquet_view(con, "reference_token_counts", reference, files["reference"])
    parquet_view(con, "current_token_counts", current, files["current"])
    query = sql("drift_token_counts.sql", reference_counts="reference_token_counts", current_counts="current_token_counts")
    rows = con.execute(query).fetchall()  # one per token counted in either run: the vocabulary at most
    token_id, reference_token, current_token, a, b = (list(column) for column in zip(*rows, strict=True)) if rows else ([],) * 5
    return moved_of(
        np.array(token_id, dtype=np.int64), reference_token, current_token, np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
    )


def moved_of(token_id: np.ndarray, reference_token: list, current_token: list, a: np.ndarray, b: np.ndarray) -> list[MovedToken] | str:
    """The moved tokens of per-token counts (one entry per token id counted in either run)."""
    strings = [(t, r, c) for t, r, c in zip(token_id.tolist(), reference_token, current_token, strict=True) if _seen(r) and _seen(c)]
    differ = next(((t, r, c) for t, r, c in strings if r != c), None)
    if differ is not None:
        t, r, c = differ
        return f"the runs' tokenizers differ (token id {t} is {r!r} in the reference and {c!r} here)"
    m, n, distinct = float(a.sum()), float(b.sum()), len(token_id)
    r_share = (a + 0.5) / (m + 0.5 * distinct)
    c_share = (b + 0.5) / (n + 0.5 * distinct)
    log_ratio = np.log(c_share / r_share)
    eligible = np.flatnonzero((a >= MIN_COUNT) | (b >= MIN_COUNT))
    order = eligible[np.lexsort((token_id[eligible], -np.abs(log_ratio[eligible])))][:MOVED]
    return [
        MovedToken(
            token_id=int(token_id[k]),
            token=current_token[k] if _seen(current_token[k]) else reference_token[k],
            reference_count=int(a[k]),
            current_count=int(b[k]),
            reference_share=float(r_share[k]),
            current_share=float(c_share[k]),
            log_ratio=float(log_ratio[k]),
        )
        for k in order
    ]


def _seen(token) -> bool:
    return token is not None
