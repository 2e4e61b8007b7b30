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

Memory: of the two samples (about embedding_rows rows each, whatever the run's size) only the fit
rows are held, as one float64 matrix filled from the files a parquet batch at a time and
standardised in place (the deviations a block of columns at a time); it is freed before the files
are read again and the test rows standardised and scored a batch at a time. At 20,000 + 20,000
sampled rows of width 768 that matrix (about 120 MB) is the signal's whole footprint. No per-row
Python objects but the 20 examples'.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

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
READ_ROWS = 256  # embeddings.parquet's rows read (and test rows scored) at a time: 2,048 held 25 MB more at width 768
Z = 1.959963984540054  # the 97.5% normal quantile of auc_ci
LONG_TEXT_PARAMETERS = {"truncate": (), "head_tail": ("head_tokens",), "chunk": ("chunk_overlap", "chunk_aggregate", "max_chunks")}


def fit_rows(row_index: np.ndarray) -> np.ndarray:
    """Whether each row fits (W_i < 0.5, W_i from sha256(f"split:{row_index}")) or tests: compared
    exactly, as the integer of the first 8 bytes below 2^63 (the sample's own draws)."""
    return draws(SPLIT_KEY, np.asarray(row_index)) < np.uint64(1 << 63)


@dataclass(frozen=True)
class Embeddings:
    """One run's embeddings held in memory (bench/representation.py builds them): rows in any order."""

    row_index: np.ndarray  # int64
    ids: Any  # a pyarrow array, in the matrix's row order
    matrix: np.ndarray  # (rows, width) float32

    @property
    def width(self) -> int:
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 else 0

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, the rows' float32 vectors) a block of READ_ROWS rows at a time."""
        for start in range(0, len(self.row_index), READ_ROWS):
            yield start, self.matrix[start : start + READ_ROWS]


@dataclass(frozen=True)
class EmbeddingsFile:
    """One run's embeddings.parquet: its row_index and ids read, its vectors read a batch at a time
    whenever `blocks` is iterated (the measurement reads them twice: the fit rows into the float64
    fit matrix, then, once that is freed, the test rows to score them), so no float32 copy of the
    file is held beside the fit matrix."""

    location: Location
    path: str
    row_index: np.ndarray  # int64, in the file's row order
    ids: Any  # a pyarrow array, in the file's row order
    width: int  # 0 when the file holds no rows

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, the rows' float32 vectors) a parquet batch at a time: a view of the batch's
        values (no copy); one line naming the problem when a vector is null or of another width."""
        import pyarrow as pa
        import pyarrow.compute as pc

        start = 0
        with self.location.fs.open(self.path, "rb") as f:
            for batch in open_parquet(f).iter_batches(columns=["embedding"], batch_size=READ_ROWS):
                column = batch.column(0)
                lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
                if column.null_count or (lengths != self.width).any():
                    raise ValueError(f"{self.path}: embeddings of different widths or null embeddings")
                values = pc.list_flatten(column).to_numpy(zero_copy_only=False)
                yield start, values.reshape(len(column), self.width)
                start += len(column)
        pa.default_memory_pool().release_unused()  # the batches' pages back to the system, not kept by the allocator


def open_parquet(f):
    """A parquet file read a page at a time (buffered, not pre-buffered): without that, reading a
    column of a file written as one row group holds the whole column chunk (the file's vectors)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(f, pre_buffer=False, buffer_size=1 << 20)


def read_embeddings(run: Location) -> EmbeddingsFile:
    """A run's embeddings.parquet: its row_index, ids and width (its first vector's, the file's
    value count checked against it; EmbeddingsFile.blocks checks every vector); the vectors are read
    when measured. One line naming the problem when it is malformed."""
    path = run.join(RunFolder.EMBEDDINGS)
    with run.fs.open(path, "rb") as f:
        parquet = open_parquet(f)
        row_index = parquet.read(columns=["row_index"]).column(0).to_numpy().astype(np.int64)
        ids = parquet.read(columns=["id"]).column(0)
        first = next(parquet.iter_batches(columns=["embedding"], batch_size=1), None)  # read a page at a time: the first row's page
        width = len(first.column(0)[0]) if first is not None and first.num_rows and first.column(0)[0].is_valid else 0
        metadata = parquet.metadata
        leaf = next(k for k in range(metadata.num_columns) if metadata.schema.column(k).path.split(".")[0] == "embedding")
        values = sum(metadata.row_group(g).column(leaf).num_values for g in range(metadata.num_row_groups))
    if values != width * len(row_index):  # a null vector counts one value, an empty list one too
        raise ValueError(f"{path}: embeddings of different widths or null embeddings")
    return EmbeddingsFile(run, path, row_index, ids, width)


Sample = Embeddings | EmbeddingsFile


class ScoredWindow(BaseModel):
    """metrics.json `scoring.long_text` as far as a run's embeddings depend on it: the window."""

    model_config = ConfigDict(frozen=True)  # a recorded section's counts are ignored

    max_length: int | None = None


class ScoredWith(BaseModel):
    """How a run's rows were scored, as far as its embeddings depend on it: the compute dtype and
    the window used. This run's as the gather reports them (EvaluationSettings.scored_with); a
    completed run's read from its metrics.json `scoring` section (RecordedScoring), tolerantly: what
    an older run lacks is None, the section's other figures are ignored."""

    model_config = ConfigDict(frozen=True)

    dtype: str | None = None
    long_text: ScoredWindow | None = None

    @property
    def max_length(self) -> int | None:
        return self.long_text.max_length if self.long_text is not None else None


class RecordedScoring(BaseModel):
    """A completed run's metrics.json as far as its embeddings' facts go: its `scoring` section."""

    model_config = ConfigDict(frozen=True)  # every other key of the document is ignored

    scoring: ScoredWith | None = None


class EmbeddingFacts(BaseModel):
    """What decides a run's embeddings besides its rows (two runs' embeddings compare when these
    are equal): the model and adapter fingerprints, the compute dtype, long_text, max_length and
    the long_text mode's parameters (None where the run's mode has not that parameter), in the order
    why_not_comparable names the first that differs."""

    model_config = ConfigDict(frozen=True)

    model: str | None
    adapter: str | None
    dtype: str | None
    long_text: str
    max_length: int | None
    head_tokens: int | None = None  # head_tail
    chunk_overlap: int | None = None  # chunk
    chunk_aggregate: str | None = None  # chunk
    max_chunks: int | None = None  # chunk


def scoring_facts(plan: dict, request: dict, scoring: ScoredWith | None) -> EmbeddingFacts:
    """What decides a run's embeddings besides its rows: the model and adapter fingerprints
    (plan.json), the compute dtype and max_length as used (`scoring`: metrics.json's scoring section,
    or the gather's; the requested values when it does not say), long_text and its parameters."""
    scoring = scoring or ScoredWith()
    long_text = request.get("long_text") or "truncate"
    return EmbeddingFacts(
        model=plan.get("model_fingerprint"),
        adapter=plan.get("adapter_fingerprint"),
        dtype=scoring.dtype or request.get("dtype"),
        long_text=long_text,
        max_length=scoring.max_length or request.get("max_length"),
        **{name: request.get(name) for name in LONG_TEXT_PARAMETERS.get(long_text, ())},
    )


def why_not_comparable(reference: EmbeddingFacts, current: EmbeddingFacts) -> str | None:
    """Why two runs' embeddings are not comparable (the first fact that differs), or None."""
    if reference.model != current.model:
        return "the runs scored different models (model fingerprints differ)"
    if reference.adapter != current.adapter:
        return "the runs scored with different adapters (adapter fingerprints differ)"
    for name in EmbeddingFacts.model_fields:  # the fingerprints (equal here), dtype, long_text, max_length, the modes' parameters
        theirs, ours = getattr(reference, name), getattr(current, name)
        if theirs != ours:
            return f"the runs were scored with different {name} ({theirs!r} in the reference, {ours!r} here)"
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


def slots(row_index: np.ndarray, chosen: np.ndarray, first: int = 0) -> np.ndarray:
    """Each row's place among the `chosen` rows in row_index order, counted from `first` (-1 where
    not chosen): where a row read in the file's order goes in the fit matrix or the test scores."""
    positions = np.flatnonzero(chosen)
    positions = positions[np.argsort(row_index[positions], kind="stable")]
    out = np.full(len(row_index), -1, dtype=np.int64)
    out[positions] = np.arange(first, first + len(positions))
    return out


def measure(reference: Sample, current: Sample) -> Measured | str:
    """The signal of `current` against `reference`, or why it cannot be measured."""
    from scipy.stats import mannwhitneyu
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from threadpoolctl import threadpool_limits

    empty = [side for side, run in (("reference", reference), ("current", current)) if not len(run.row_index)]
    if empty:
        return f"the {' and the '.join(empty)} run's embeddings.parquet holds no rows (embedding_rows 0)"
    if reference.width != current.width:
        return f"the runs' embeddings differ in width ({reference.width} in the reference, {current.width} here)"
    fit = {"reference": fit_rows(reference.row_index), "current": fit_rows(current.row_index)}
    rows = {side: {"fit": int(f.sum()), "test": int((~f).sum())} for side, f in fit.items()}
    empty = [f"{side} {part}" for side in rows for part in ("fit", "test") if rows[side][part] == 0]
    if empty:
        return f"no {' and no '.join(empty)} rows in the embeddings' samples (too few rows)"
    # the fit rows as one float64 matrix (reference then current, each in row_index order), filled a
    # batch at a time and standardised in place; freed before the test rows are read and scored
    sizes = [rows["reference"]["fit"], rows["current"]["fit"], rows["reference"]["test"], rows["current"]["test"]]
    x = np.empty((sizes[0] + sizes[1], reference.width), dtype=np.float64)
    for run, side, first in ((reference, "reference", 0), (current, "current", sizes[0])):
        place = slots(run.row_index, fit[side], first)
        for start, block in run.blocks():
            at = place[start : start + len(block)]
            x[at[at >= 0]] = block[at >= 0]
    mean = x.mean(axis=0)
    sd = np.concatenate([x[:, j : j + BLOCK].std(axis=0) for j in range(0, x.shape[1], BLOCK)])  # ddof 0, a block of columns at a time
    sd[sd == 0] = 1.0
    x -= mean
    x /= sd
    y_fit = np.r_[np.zeros(sizes[0]), np.ones(sizes[1])]
    with threadpool_limits(FIT_THREADS):
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000).fit(x, y_fit)
    del x
    scores = np.empty(sizes[2] + sizes[3])  # the test rows' decision function: reference's then current's, row_index order
    for run, side, first in ((reference, "reference", 0), (current, "current", sizes[2])):
        place = slots(run.row_index, ~fit[side], first)
        for start, block in run.blocks():
            at = place[start : start + len(block)]
            if (at >= 0).any():
                scores[at[at >= 0]] = model.decision_function((block[at >= 0].astype(np.float64) - mean) / sd)
    ref_scores, cur_scores = scores[: sizes[2]], scores[sizes[2] :]
    auc = float(roc_auc_score(np.r_[np.zeros(sizes[2]), np.ones(sizes[3])], scores))
    p = float(mannwhitneyu(cur_scores, ref_scores, alternative="greater").pvalue)
    test_positions = np.flatnonzero(~fit["current"])
    test_positions = test_positions[np.argsort(current.row_index[test_positions], kind="stable")]
    test_index = current.row_index[test_positions]
    order = np.lexsort((test_index, -cur_scores))[:EXAMPLES]
    examples = [
        {"row_index": int(test_index[k]), "id": current.ids[int(test_positions[k])].as_py(), "score": float(cur_scores[k])} for k in order
    ]
    return Measured(auc, hanley_mcneil(auc, sizes[3], sizes[2]), p, rows, examples)


def compare_runs(reference: Location, current: Location, current_scoring: ScoredWith | None) -> Measured | str:
    """The signal of run `current` against run `reference` (their folders), or why it is skipped:
    either run without embeddings.parquet, or their embeddings made differently (why_not_comparable).
    `current_scoring` is this run's scoring section as far as it is known (dtype, long_text), the
    reference's is its metrics.json's."""
    missing = [side for side, run in (("reference", reference), ("current", current)) if not run.exists(RunFolder.EMBEDDINGS)]
    if missing:
        return f"the {' and the '.join(missing)} run has no {RunFolder.EMBEDDINGS} (embedding_rows 0, or written before SPEC section 14)"
    recorded = (
        RecordedScoring.model_validate(reference.read_json(RunFolder.METRICS)) if reference.exists(RunFolder.METRICS) else RecordedScoring()
    )
    facts = [
        scoring_facts(reference.read_json(RunFolder.PLAN), reference.read_json(RunFolder.REQUEST), recorded.scoring),
        scoring_facts(current.read_json(RunFolder.PLAN), current.read_json(RunFolder.REQUEST), current_scoring),
    ]
    why = why_not_comparable(*facts)
    if why is not None:
        return why
    return measure(read_embeddings(reference), read_embeddings(current))
