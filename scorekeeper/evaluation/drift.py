"""Drift: whether a run's inputs and outputs moved against a reference run's (docs/drift.md).

Every scored row of both runs takes part. Per signal (a value per row, numeric or categorical):

    bins      categorical: one per value seen in either run (null its own); past 50 values the
              reference's 49 most frequent and `other`. numeric: the reference's nearest-rank
              deciles (edge j = the value at 1-based rank ceil(j m / 10) of its m sorted non-null
              values), duplicates merged, bins (-inf, e1], (e1, e2], ..., (e_last, +inf); nulls
              their own bin
    psi       sum_j (c_j - r_j) ln(c_j / r_j) over shares smoothed by half a row per bin
    p         the chi-square upper tail of psi m n / (m + n) with B - 1 degrees of freedom
    ks        numeric signals: the exact two-sample Kolmogorov-Smirnov statistic
    p_holm    Holm's step-down adjustment over all signals of the run
    drifted   psi >= min_psi and p_holm < 0.05; null (not judged) below 100 rows in either run

The values, bins, counts, PSI and KS are SQL (sql/drift/) over one table of every signal's values
(`drift_values`); Python sees only the per-bin counts. A signal either run cannot supply (a run
written before predictions.parquet had `tokens`, a slice column the reference did not stage) is
left out and named in `skipped`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scorekeeper.evaluation.duck import parquet_uri, sql
from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import Drift, DriftBin, DriftRows, DriftSignal, RecordedMetrics
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location

DEFAULT_MIN_PSI = 0.1
ALPHA = 0.05  # the Holm-adjusted p below which a shift is real
MIN_ROWS = 100  # fewer rows than this in either run: no signal is judged
MAX_VALUES = 50  # a categorical signal's bins: past this many values, the reference's 49 and `other`
DECILES = 10
SIDES = ("reference", "current")


@dataclass(frozen=True)
class RunSide:
    """One run as the drift step reads it: its predictions (a view), its columns, its staged input's
    slice columns by the user's name (the staged column holding each), its labels."""

    side: str  # "reference" or "current"
    predictions: str  # the view of its predictions.parquet
    columns: frozenset[str]
    labels: list[str]
    staged: str | None = None  # the view of its staged input, when it has one
    slices: dict[str, str] | None = None  # user's slice column -> staged column


def open_reference(con, reference: Location) -> RunSide:
    """The reference run's predictions (and staged input, when it is still there and holds one row
    per prediction) as views on `con`, once the run vouches for the files read here
    (scorekeeper/run_seal.py: checked as they are now, not only when the run started)."""
    refuse_unverified(RunFolder(reference.fs, reference.path), "drift_reference")
    con.read_parquet(parquet_uri(reference, RunFolder.PREDICTIONS)).create_view("reference_predictions")
    plan = reference.read_json(RunFolder.PLAN) if reference.exists(RunFolder.PLAN) else {}
    request = reference.read_json(RunFolder.REQUEST) if reference.exists(RunFolder.REQUEST) else {}
    staged, slices = None, None
    if reference.exists(RunFolder.STAGED_INPUT):
        # work/ is not sealed: its slice columns are used only when it still holds the predicted rows
        con.read_parquet(parquet_uri(reference, RunFolder.STAGED_INPUT)).create_view("reference_staged")
        rows = con.execute(sql("drift_staged_rows.sql")).fetchone()
        if rows[0] == rows[1]:
            staged = "reference_staged"
            slices = {column: f"slice_{i}" for i, column in enumerate(request.get("slice_columns") or [])}
    return RunSide("reference", "reference_predictions", columns_of(con, "reference_predictions"), plan.get("labels") or [], staged, slices)


def current_side(con, labels: list[str], slice_columns: list[str]) -> RunSide:
    """This run as the evaluation's connection holds it (`predictions`, `staged`)."""
    slices = {column: f"slice_{i}" for i, column in enumerate(slice_columns)}
    return RunSide("current", "predictions", columns_of(con, "predictions"), labels, "staged", slices)


def columns_of(con, view: str) -> frozenset[str]:
    return frozenset(d[0] for d in con.execute(sql("drift_columns.sql", view=view)).description)


def collect_values(
    con, head: HeadKind | str, reference: RunSide, current: RunSide, slice_columns: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """Fill `drift_values` with every signal both runs supply; the numeric signals, and the skipped
    ones with the reason."""
    head = HeadKind(head)
    skipped: dict[str, str] = {}
    numeric: list[str] = []
    con.execute(sql("drift_values.sql"))
    sides = (reference, current)

    def insert(name: str, **macros) -> None:
        for side in sides:
            con.execute(sql(name, source=side.predictions, **macros), {"side": side.side})

    for name in ("tokens", "unknown_token_share"):
        missing = [s.side for s in sides if not {"tokens", "unknown_tokens"} <= s.columns]
        if missing:
            skipped[name] = f"the {' and '.join(missing)} run's predictions.parquet has no tokens and unknown_tokens columns"
    if "tokens" not in skipped:
        insert("drift_tokens.sql")
        numeric += ["tokens", "unknown_token_share"]
    shared = [(i, name) for i, name in enumerate(current.labels) if name in reference.labels]
    per_label = (
        "positive:" if head == HeadKind.MULTI_LABEL else "prediction:" if head == HeadKind.REGRESSION and len(current.labels) > 1 else None
    )
    if per_label:
        for name in current.labels:
            if name not in reference.labels:
                skipped[per_label + name] = "the reference run's model has no such output"
    con.execute(sql("drift_labels.sql"), {"ids": [i for i, _ in shared], "names": [n for _, n in shared]})
    if head == HeadKind.SINGLE_LABEL:
        insert("drift_single_label.sql")
        numeric.append("score")
    elif head == HeadKind.MULTI_LABEL:
        insert("drift_multi_label.sql")
        numeric.append("labels_per_row")
    elif len(current.labels) > 1:
        for side in sides:
            # the reference's outputs in its own order: its list positions, named as this run's
            ids = [side.labels.index(n) for _, n in shared]
            con.execute(sql("drift_labels.sql"), {"ids": ids, "names": [n for _, n in shared]})
            con.execute(sql("drift_regression_outputs.sql", source=side.predictions), {"side": side.side})
        numeric += [f"prediction:{n}" for _, n in shared]
    else:
        insert("drift_regression.sql")
        numeric.append("prediction")
    for column in slice_columns:
        signal = f"slice:{column}"
        absent = [s.side for s in sides if s.staged is None or not s.slices or column not in s.slices]
        if absent:
            skipped[signal] = f"the {' and '.join(absent)} run staged no slice column {column!r}"
            continue
        for side in sides:
            assert side.staged is not None and side.slices is not None
            con.execute(sql("drift_slice.sql", staged=side.staged, column=side.slices[column]), {"side": side.side, "signal": signal})
    return numeric, skipped


def decile_ranks(m: int) -> list[int]:
    """The 1-based ranks of the nearest-rank deciles of m values: ceil(j m / 10), j = 1..9, in integers."""
    return [(j * m + DECILES - 1) // DECILES for j in range(1, DECILES)]


def numeric_edges(con, numeric: Sequence[str]) -> dict[str, list[float]]:
    """Each numeric signal's merged decile edges of the reference's non-null values (empty when it
    has none), as the table `drift_edges`."""
    counts = dict(con.execute(sql("drift_reference_counts.sql"), {"signals": list(numeric)}).fetchall())
    edges: dict[str, list[float]] = {}
    for signal in numeric:
        m = int(counts.get(signal, 0))
        if m == 0:
            edges[signal] = []
            continue
        # DuckDB's quantile_disc(q) is the value at 1-based rank ceil(q m); q = (rank - 0.5) / m puts
        # that rank half a row away from any rounding of q m.
        quantiles = [(r - 0.5) / m for r in decile_ranks(m)]
        values = con.execute(sql("drift_deciles.sql"), {"quantiles": quantiles, "signal": signal}).fetchone()[0]
        edges[signal] = sorted(set(float(v) for v in values))
    con.execute(sql("drift_edges.sql"), {"signals": list(edges), "edges": list(edges.values())})
    return edges


def chi_square_p(psi: float, m: int, n: int, bins: int) -> float:
    """The upper tail of psi m n / (m + n) under chi-square with bins - 1 degrees of freedom (1.0 for
    one bin: nothing can move)."""
    from scipy.stats import chi2

    if bins <= 1 or m == 0 or n == 0:
        return 1.0
    return float(chi2.sf(psi * m * n / (m + n), bins - 1))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - k) * p_values[i]))
        adjusted[i] = running
    return adjusted


def drift(
    con,
    head: HeadKind | str,
    reference: RunSide,
    current: RunSide,
    slice_columns: Sequence[str],
    reference_name: str,
    min_psi: float = DEFAULT_MIN_PSI,
) -> Drift:
    """metrics.json `drift` of `current` against `reference` (both open on `con`)."""
    numeric, skipped = collect_values(con, head, reference, current, slice_columns)
    edges = numeric_edges(con, numeric)
    con.execute(sql("drift_bins.sql"), {"max_values": MAX_VALUES})
    rows = {side.side: int(con.execute(sql("drift_rows.sql", source=side.predictions)).fetchone()[0]) for side in (reference, current)}
    m, n = rows["reference"], rows["current"]
    ks = dict(con.execute(sql("drift_ks.sql")).fetchall())
    stats = {signal: (int(b), float(psi)) for signal, b, _, _, psi in con.execute(sql("drift_psi.sql")).fetchall()}
    bins: dict[str, list[DriftBin]] = {}
    for signal, b, is_null, value, is_other, a, c in con.execute(sql("drift_bin_rows.sql")).fetchall():
        lower = upper = None
        if signal in edges and not is_null:
            e = edges[signal]
            lower = e[b - 1] if b > 0 else None
            upper = e[b] if b < len(e) else None
        bins.setdefault(signal, []).append(
            DriftBin(
                value=value,
                null=bool(is_null),
                other=bool(is_other),
                lower=lower,
                upper=upper,
                reference_rows=int(a),
                current_rows=int(c),
                reference=a / m if m else 0.0,
                current=c / n if n else 0.0,
            )
        )
    names = sorted(stats)
    p = {s: chi_square_p(stats[s][1], m, n, stats[s][0]) for s in names}
    p_holm = dict(zip(names, holm([p[s] for s in names]), strict=True))
    judged = m >= MIN_ROWS and n >= MIN_ROWS
    reason = (
        None if judged else f"not judged: {min(m, n)} rows in the {'reference' if m < n else 'current'} run (at least {MIN_ROWS} needed)"
    )
    signals: dict[str, DriftSignal] = {}
    for s in names:
        psi = stats[s][1]
        signal = DriftSignal(
            kind="numeric" if s in edges else "categorical",
            bins=bins[s],
            psi=psi,
            p=p[s],
            p_holm=p_holm[s],
            drifted=(psi >= min_psi and p_holm[s] < ALPHA) if judged else None,
        )
        if s in edges:
            signal.ks = _finite_or_none(ks.get(s))
        if reason:
            signal.reason = reason
        signals[s] = signal
    worst_first = sorted(signals, key=lambda s: (-signals[s].psi, s))
    drifted = [s for s in worst_first if signals[s].drifted]
    return Drift(
        reference=reference_name,
        rows=DriftRows(reference=m, current=n),
        min_psi=min_psi,
        signals={s: signals[s] for s in worst_first},
        drifted=drifted,
        drifted_signals=len(drifted),
        alarm=bool(drifted),
        skipped=skipped,
    )


def recorded_reference(reference: Location) -> RecordedMetrics:
    """The reference run's metrics.json, read tolerantly (an older run's lacks later fields)."""
    return RecordedMetrics.parse(reference.read_json(RunFolder.METRICS)) or RecordedMetrics()


def _finite_or_none(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
