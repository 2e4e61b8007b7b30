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

Memory: the two samples (about embedding_rows rows each, whatever the run's size) are held as
float32; only the fit rows become one float64 matrix, standardised in place (the deviations a block
of columns at a time); the test rows are standardised and scored a block of rows at a time. No
per-row Python objects but the 20 examples'.
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
BLOCK = 64  # columns standardised at a time (numpy's std makes a copy of what it is given)
BLOCK_ROWS = 4096  # test rows standardised and scored at a time
READ_ROWS = 2048  # embeddings.parquet's rows read at a time
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
    """A run's embeddings.parquet in row_index order, read a batch at a time into one float32 matrix
    (no second copy of the file in memory); one line naming the problem when it is malformed."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = run.join(RunFolder.EMBEDDINGS)
    with run.fs.open(path, "rb") as f:
        parquet = pq.ParquetFile(f)
        n = parquet.metadata.num_rows
        row_index = parquet.read(columns=["row_index"]).column(0).to_numpy().astype(np.int64)
        ids = parquet.read(columns=["id"]).column(0)
        matrix, start = np.zeros((0, 0), dtype=np.float32), 0
        for batch in parquet.iter_batches(columns=["embedding"], batch_size=READ_ROWS):
            column = batch.column(0)
            lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
            if start == 0:
                matrix = np.empty((n, int(lengths[0]) if len(lengths) else 0), dtype=np.float32)
            if column.null_count or (lengths != matrix.shape[1]).any():
                raise ValueError(f"{path}: embeddings of different widths or null embeddings")
            matrix[start : start + len(column)] = pc.list_flatten(column).to_numpy(zero_copy_only=False).reshape(len(column), -1)
            start += len(column)
    if len(row_index) > 1 and not (np.diff(row_index) > 0).all():  # the gather writes them in row_index order
        order = np.argsort(row_index, kind="stable")
        row_index, ids, matrix = row_index[order], ids.take(order), matrix[order]
    return Embeddings(row_index, ids, matrix)


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

    empty = [side for side, run in (("reference", reference), ("current", current)) if not len(run.row_index)]
    if empty:
        return f"the {' and the '.join(empty)} run's embeddings.parquet holds no rows (embedding_rows 0)"
    if reference.matrix.shape[1] != current.matrix.shape[1]:
        return f"the runs' embeddings differ in width ({reference.matrix.shape[1]} in the reference, {current.matrix.shape[1]} here)"
    fit = {"reference": fit_rows(reference.row_index), "current": fit_rows(current.row_index)}
    rows = {side: {"fit": int(f.sum()), "test": int((~f).sum())} for side, f in fit.items()}
    empty = [f"{side} {part}" for side in rows for part in ("fit", "test") if rows[side][part] == 0]
    if empty:
        return f"no {' and no '.join(empty)} rows in the embeddings' samples (too few rows)"
    # the fit rows as one float64 matrix (reference then current, each in row_index order), standardised
    # in place; the test rows stay float32 and are standardised a block at a time when scored
    sizes = [rows["reference"]["fit"], rows["current"]["fit"], rows["reference"]["test"], rows["current"]["test"]]
    x = np.empty((sizes[0] + sizes[1], reference.matrix.shape[1]), dtype=np.float64)
    x[: sizes[0]] = reference.matrix[fit["reference"]]
    x[sizes[0] :] = current.matrix[fit["current"]]
    mean = x.mean(axis=0)
    sd = np.concatenate([x[:, j : j + BLOCK].std(axis=0) for j in range(0, x.shape[1], BLOCK)])  # ddof 0, a block of columns at a time
    sd[sd == 0] = 1.0
    x -= mean
    x /= sd
    y_fit = np.r_[np.zeros(sizes[0]), np.ones(sizes[1])]
    with threadpool_limits(FIT_THREADS):
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit(x, y_fit)
    del x

    def decision(run: Embeddings, test: np.ndarray) -> np.ndarray:
        index = np.flatnonzero(test)
        parts = [(run.matrix[index[k : k + BLOCK_ROWS]].astype(np.float64) - mean) / sd for k in range(0, len(index), BLOCK_ROWS)]
        return np.concatenate([model.decision_function(part) for part in parts])

    scores = np.concatenate([decision(reference, ~fit["reference"]), decision(current, ~fit["current"])])
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
