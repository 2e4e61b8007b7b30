"""SPEC section 14's `representation` drift signal (docs/drift.md): can a classifier tell this run's
rows from the reference's by the model's own representation of them?

    sample    each run's embeddings.parquet (the rows the worker sampled, `embedding_rows`)
    split     W_i = the first 8 bytes of sha256(f"split:{row_index}") as a big-endian integer / 2^64;
              W_i < 0.5 fit, the others test (a function of row_index alone)
    fit       float64; standardised by the mean and the population deviation (ddof 0; a zero
              deviation as 1) of the fit rows of both runs, the reference's in row_index order then
              this run's; scikit-learn LogisticRegression(C=1.0, class_weight="balanced",
              max_iter=1000), this run class 1
    test      auc = scikit-learn's ROC AUC of the decision function; p = scipy's one-sided
              Mann-Whitney U (this run's scores greater); auc_ci = Hanley-McNeil, clipped to [0, 1]
    examples  the 20 test rows of this run with the largest decision function (ties by row_index),
              their text's first 300 characters

Skipped, naming why, unless both runs wrote embeddings of one width under the same model, adapter
and scoring settings (the compute dtype, long_text and its parameters, max_length). The Holm
adjustment and the verdict are drift.py's (the signal joins section 12's family there).

Memory: the two samples (at most about embedding_rows rows each, whatever the run's size) are read
one after the other into one float64 matrix, standardised in place; no per-row Python objects
except the 20 examples'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scorekeeper.representation import draws
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location

SPLIT_KEY = "split"  # W_i = sha256(f"split:{row_index}")
EXAMPLES = 20  # the current test rows shown as the texts most unlike the reference
TEXT_CHARS = 300  # an example's text: its first characters
MIN_TEST_ROWS = 100  # fewer test rows than this in either run: not judged
# BLAS threads of the fit: one. On a loaded machine (the flow shares it with the scoring processes)
# more threads made the fit 10-40x slower (1,000 + 1,000 rows of width 384: 3.1 s against 0.07 s
# on one thread, bench/representation.py); at 20k + 20k rows of width 768 one thread takes
# bench/README.md's figure.
FIT_THREADS = 1
Z = 1.959963984540054  # the 97.5% normal quantile of auc_ci
LONG_TEXT_PARAMETERS = {"truncate": (), "head_tail": ("head_tokens",), "chunk": ("chunk_overlap", "chunk_aggregate", "max_chunks")}


def fit_rows(row_index: np.ndarray) -> np.ndarray:
    """Whether each row fits (W_i < 0.5, W_i from sha256(f"split:{row_index}")) or tests: compared
    exactly, as the integer of the first 8 bytes below 2^63 (the sample's own draws)."""
    return draws(SPLIT_KEY, np.asarray(row_index)) < np.uint64(1 << 63)


@dataclass(frozen=True)
class Embeddings:
    """One run's embeddings.parquet, rows in row_index order: the matrix is float32 as written."""

    row_index: np.ndarray  # int64
    ids: Any  # a pyarrow array, row_index order
    matrix: np.ndarray  # (rows, width) float32


def read_embeddings(run: Location) -> Embeddings:
    """A run's embeddings.parquet in row_index order; one line naming the problem when it is malformed."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with run.fs.open(run.join(RunFolder.EMBEDDINGS), "rb") as f:
        table = pq.read_table(f, columns=["row_index", "id", "embedding"])
    table = table.take(pc.sort_indices(table, [("row_index", "ascending")]))
    column = table.column("embedding").combine_chunks()
    if isinstance(column, pa.ChunkedArray):  # no rows
        column = pa.array([], type=column.type) if column.num_chunks == 0 else column.chunk(0)
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False) if len(column) else np.zeros(0, dtype=np.int64)
    width = int(lengths[0]) if len(lengths) else 0
    if column.null_count or (len(lengths) and (lengths != width).any()):
        raise ValueError(f"{run.join(RunFolder.EMBEDDINGS)}: embeddings of different widths or null embeddings")
    values = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return Embeddings(table.column("row_index").to_numpy().astype(np.int64), table.column("id"), values.reshape(len(lengths), width))


def scoring_facts(plan: dict, request: dict, scoring: dict | None) -> dict[str, Any]:
    """What decides a run's embeddings besides its rows: the model and adapter fingerprints
    (plan.json), the compute dtype and max_length as used (`scoring`: metrics.json's scoring section,
    or the gather's; the requested values when it does not say), long_text and its parameters."""
    scoring = scoring or {}
    long_text = request.get("long_text") or "truncate"
    facts = {
        "model": plan.get("model_fingerprint"),
        "adapter": plan.get("adapter_fingerprint"),
        "dtype": scoring.get("dtype") or request.get("dtype"),
        "long_text": long_text,
        "max_length": (scoring.get("long_text") or {}).get("max_length") or request.get("max_length"),
    }
    for name in LONG_TEXT_PARAMETERS.get(long_text, ()):
        facts[name] = request.get(name)
    return facts


def why_not_comparable(reference: dict[str, Any], current: dict[str, Any]) -> str | None:
    """Why two runs' embeddings are not comparable (the first fact that differs), or None."""
    if reference["model"] != current["model"]:
        return "the runs scored different models (model fingerprints differ)"
    if reference["adapter"] != current["adapter"]:
        return "the runs scored with different adapters (adapter fingerprints differ)"
    for name in dict.fromkeys([*reference, *current]):  # dtype, long_text, max_length, then the long_text mode's parameters
        if reference.get(name) != current.get(name):
            return f"the runs were scored with different {name} ({reference.get(name)!r} in the reference, {current.get(name)!r} here)"
    return None


@dataclass(frozen=True)
class Measured:
    """The signal before the Holm adjustment: drift.py adds p_holm and the verdict."""

    auc: float
    auc_ci: list[float]
    p: float
    rows: dict[str, dict[str, int]]  # {reference, current: {fit, test}}
    examples: list[dict[str, Any]]  # [{row_index, id, score}] (drift.py's caller adds the text)

    @property
    def judged(self) -> bool:
        return min(self.rows["reference"]["test"], self.rows["current"]["test"]) >= MIN_TEST_ROWS


def hanley_mcneil(auc: float, n1: int, n0: int) -> list[float]:
    """auc -+ Z SE, SE^2 = (A(1-A) + (n1-1)(Q1-A^2) + (n0-1)(Q2-A^2)) / (n1 n0), clipped to [0, 1]."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    se = math.sqrt(max(0.0, (auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n0 - 1) * (q2 - auc**2)) / (n1 * n0)))
    return [max(0.0, auc - Z * se), min(1.0, auc + Z * se)]


def measure(reference: Embeddings, current: Embeddings) -> Measured | str:
    """The signal of `current` against `reference`, or why it cannot be measured."""
    from scipy.stats import mannwhitneyu
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from threadpoolctl import threadpool_limits

    if reference.matrix.shape[1] != current.matrix.shape[1]:
        return f"the runs' embeddings differ in width ({reference.matrix.shape[1]} in the reference, {current.matrix.shape[1]} here)"
    fit = {"reference": fit_rows(reference.row_index), "current": fit_rows(current.row_index)}
    runs = {"reference": reference, "current": current}
    rows = {side: {"fit": int(f.sum()), "test": int((~f).sum())} for side, f in fit.items()}
    empty = [f"{side} {part}" for side in rows for part in ("fit", "test") if rows[side][part] == 0]
    if empty:
        return f"no {' and no '.join(empty)} rows in the embeddings' samples (too few rows)"
    # one float64 matrix: reference fit, current fit, reference test, current test (each in row_index order)
    parts = [(side, mask) for mask in (True, False) for side in ("reference", "current")]
    sizes = [rows[side]["fit" if mask else "test"] for side, mask in parts]
    x = np.empty((sum(sizes), reference.matrix.shape[1]), dtype=np.float64)
    start = 0
    for (side, mask), size in zip(parts, sizes, strict=True):
        x[start : start + size] = runs[side].matrix[fit[side] == mask]
        start += size
    n_fit = sizes[0] + sizes[1]
    mean = x[:n_fit].mean(axis=0)
    sd = x[:n_fit].std(axis=0)  # ddof 0
    sd[sd == 0] = 1.0
    x -= mean
    x /= sd
    y_fit = np.r_[np.zeros(sizes[0]), np.ones(sizes[1])]
    with threadpool_limits(FIT_THREADS):
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit(x[:n_fit], y_fit)
    scores = model.decision_function(x[n_fit:])
    del x
    ref_scores, cur_scores = scores[: sizes[2]], scores[sizes[2] :]
    auc = float(roc_auc_score(np.r_[np.zeros(sizes[2]), np.ones(sizes[3])], scores))
    p = float(mannwhitneyu(cur_scores, ref_scores, alternative="greater").pvalue)
    test_index = current.row_index[~fit["current"]]
    test_ids = current.ids.take(np.flatnonzero(~fit["current"]))
    order = np.lexsort((test_index, -cur_scores))[:EXAMPLES]
    examples = [{"row_index": int(test_index[k]), "id": test_ids[int(k)].as_py(), "score": float(cur_scores[k])} for k in order]
    return Measured(auc, hanley_mcneil(auc, sizes[3], sizes[2]), p, rows, examples)


def compare_runs(reference: Location, current: Location, current_scoring: dict | None) -> Measured | str:
    """The signal of run `current` against run `reference` (their folders), or why it is skipped:
    either run without embeddings.parquet, or their embeddings made differently (why_not_comparable).
    `current_scoring` is this run's scoring section as far as it is known (dtype, long_text), the
    reference's is its metrics.json's."""
    missing = [side for side, run in (("reference", reference), ("current", current)) if not run.exists(RunFolder.EMBEDDINGS)]
    if missing:
        return f"the {' and the '.join(missing)} run has no {RunFolder.EMBEDDINGS} (embedding_rows 0, or written before SPEC section 14)"
    recorded = reference.read_json(RunFolder.METRICS) if reference.exists(RunFolder.METRICS) else {}
    facts = [
        scoring_facts(reference.read_json(RunFolder.PLAN), reference.read_json(RunFolder.REQUEST), recorded.get("scoring")),
        scoring_facts(current.read_json(RunFolder.PLAN), current.read_json(RunFolder.REQUEST), current_scoring),
    ]
    why = why_not_comparable(*facts)
    if why is not None:
        return why
    return measure(read_embeddings(reference), read_embeddings(current))
