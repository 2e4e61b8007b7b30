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

SPEC section 14's `representation` signal (representation.py: a classifier of the two runs'
embeddings, its held-out AUC and Mann-Whitney p) joins the same Holm family, drifted when
auc >= min_auc and p_holm < 0.05, not judged below 100 test rows in either run; its examples get
their text here, from this run's staged input.

The values, bins, counts, PSI and KS are SQL (sql/drift/): each signal is a view of both runs'
values, read straight from their files one signal at a time (its reference count and deciles, its
bin counts, its KS statistic), so no table of every row's values is made; Python sees only counts
per bin (and, for KS, one integer per signal). A signal either run cannot supply (a run written
before predictions.parquet had `tokens`, a slice column the reference did not stage) is left out and
named in `skipped`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from scorekeeper.evaluation.duck import one_row, parquet_view, sql
from scorekeeper.evaluation.representation import MIN_TEST_ROWS, TEXT_CHARS, Measured
from scorekeeper.evaluation.signals import OwnSignals, RunSide, Signal, SignalViews
from scorekeeper.metrics.document import (
    Drift,
    DriftBin,
    DriftRows,
    DriftSignal,
    RecordedMetrics,
    RepresentationExample,
    RepresentationSides,
    RepresentationSignal,
)
from scorekeeper.run_folder import RunFolder
from scorekeeper.run_seal import refuse_unverified
from scorekeeper.storage import Location

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection

DEFAULT_MIN_PSI = 0.1
DEFAULT_MIN_AUC = 0.55  # drift_min_auc: the representation signal's floor
REPRESENTATION = "representation"
ALPHA = 0.05  # the Holm-adjusted p below which a shift is real
MIN_ROWS = 100  # fewer rows than this in either run: no signal is judged
MAX_VALUES = 50  # a categorical signal's bins: past this many values, the reference's 49 and `other`
DECILES = 10
GROUPED = 4  # a numeric signal of at most (its values / GROUPED) distinct values is counted per value first
SAMPLE = 100_000  # the values that choose it
KS_BUCKETS = 4000  # a numeric signal of many values: its buckets per bin

# The signals of the run's inputs, not of the model's outputs: when one of them drifted, the
# estimate's assumption (inputs like the reference's) is in doubt, and `estimated.caveat` names it.
# The one list of them: a new input signal (SPEC section 14's representation) joins here.
INPUT_SIGNALS = ("tokens", "unknown_token_share", REPRESENTATION)
INPUT_SIGNAL_PREFIXES = ("slice:",)


def is_input_signal(name: str) -> bool:
    """Whether the drift signal `name` measures the run's inputs (INPUT_SIGNALS, INPUT_SIGNAL_PREFIXES)."""
    return name in INPUT_SIGNALS or name.startswith(INPUT_SIGNAL_PREFIXES)


def drifted_inputs(drift: Drift | None) -> list[str]:
    """The input signals that drifted, worst PSI first (drift.drifted's order)."""
    return [name for name in (drift.drifted if drift is not None else []) if is_input_signal(name)]


def open_reference(con: Connection, reference: Location, slice_columns: Sequence[str] = ()) -> RunSide:
    """The reference run's predictions (and, when this run has `slice_columns`, its staged input, when
    it is still there and holds one row per prediction) as views on `con`, once the run vouches for
    the files read here (scorekeeper/run_seal.py: checked as they are now, not only when the run started)."""
    refuse_unverified(RunFolder(reference.fs, reference.path), "drift_reference")
    parquet_view(con, "reference_predictions", reference, RunFolder.PREDICTIONS)
    plan = reference.read_json(RunFolder.PLAN) if reference.exists(RunFolder.PLAN) else {}
    request = reference.read_json(RunFolder.REQUEST) if reference.exists(RunFolder.REQUEST) else {}
    staged, slices, unstaged = None, None, None
    if slice_columns and not reference.exists(RunFolder.STAGED_INPUT):
        unstaged = f"the reference run's staged input ({RunFolder.STAGED_INPUT}) is gone"
    elif slice_columns:
        # work/ is not sealed: its slice columns are used only when it still holds the predicted rows
        parquet_view(con, "reference_staged", reference, RunFolder.STAGED_INPUT)
        if one_row(con.execute(sql("drift_staged_rows.sql")))[0] == 0:
            staged = "reference_staged"
            slices = {column: f"slice_{i}" for i, column in enumerate(request.get("slice_columns") or [])}
        else:
            unstaged = f"the reference run's staged input ({RunFolder.STAGED_INPUT}) no longer holds the rows it scored"
    columns = columns_of(con, "reference_predictions")
    return RunSide("reference", "reference_predictions", columns, plan.get("labels") or [], staged, slices, unstaged)


def current_side(con: Connection, labels: list[str], slice_columns: list[str]) -> RunSide:
    """This run as the evaluation's connection holds it (`predictions`, `staged`)."""
    slices = {column: f"slice_{i}" for i, column in enumerate(slice_columns)}
    return RunSide("current", "predictions", columns_of(con, "predictions"), labels, "staged", slices)


def columns_of(con: Connection, view: str) -> frozenset[str]:
    return frozenset(d[0] for d in con.execute(sql("drift_columns.sql", view=view)).description)


def signal_views(
    con: Connection, kind: OwnSignals, reference: RunSide, current: RunSide, slice_columns: Sequence[str]
) -> tuple[list[Signal], dict[str, str]]:
    """Every signal both runs supply as a view of its values (the kind's own as it says: a
    multi-label run's per-label signals counted at once into `drift_categorical_counts` instead);
    the skipped ones with the reason."""
    views = SignalViews(con, {"reference": reference.predictions, "current": current.predictions})
    missing = [s.side for s in (reference, current) if not {"tokens", "unknown_tokens"} <= s.columns]
    if missing:
        for name in ("tokens", "unknown_token_share"):
            views.skipped[name] = f"the {' and '.join(missing)} run's predictions.parquet has no tokens and unknown_tokens columns"
    else:
        views.view("tokens", "drift_tokens.sql", True)
        views.view("unknown_token_share", "drift_unknown_share.sql", True)
    kind.drift_signals(views, reference, current)
    for column in slice_columns:
        name = f"slice:{column}"
        if reference.unstaged:
            views.skipped[name] = reference.unstaged
            continue
        absent = [s.side for s in (reference, current) if s.staged is None or not s.slices or column not in s.slices]
        if absent:
            views.skipped[name] = f"the {' and '.join(absent)} run staged no slice column {column!r}"
            continue
        assert reference.staged is not None and current.staged is not None and reference.slices and current.slices
        views.view(name, "drift_slice.sql", False, reference=reference.staged, current=current.staged,
                   reference_column=reference.slices[column], current_column=current.slices[column])  # fmt: skip
    return views.signals, views.skipped


def decile_ranks(m: int) -> list[int]:
    """The 1-based ranks of the nearest-rank deciles of m values: ceil(j m / 10), j = 1..9, in integers."""
    return [(j * m + DECILES - 1) // DECILES for j in range(1, DECILES)]


def merged(values) -> list[float]:
    """Decile values as bin edges: ascending, duplicates merged."""
    return sorted(set(float(v) for v in values))


def quantile_edges(con: Connection, view: str, m: int) -> list[float]:
    """The merged deciles of the m non-null reference values of `view` by DuckDB's discrete quantile."""
    if m == 0:
        return []
    # quantile_disc(q) is the value at 1-based rank ceil(q m); q = (rank - 0.5) / m puts that rank
    # half a row away from any rounding of q m.
    quantiles = [(r - 0.5) / m for r in decile_ranks(m)]
    return merged(one_row(con.execute(sql("drift_deciles.sql", values=view), {"quantiles": quantiles}))[0])


def reference_edges(con: Connection, view: str) -> list[float]:
    """A numeric signal's bin edges: the merged deciles of the reference's non-null values in `view`
    (empty when it has none)."""
    return quantile_edges(con, view, int(one_row(con.execute(sql("drift_reference_range.sql", values=view)))[0]))


def padded(edges: list[float]) -> list[float]:
    """The edges padded to 9 with +inf, as the bin counts compare with."""
    return edges + [math.inf] * (DECILES - 1 - len(edges))


def few_values(con: Connection, signal: Signal) -> bool:
    """Whether a numeric signal looks to hold few distinct values (at most 1 / GROUPED of SAMPLE of its
    values, the first the scan returns, are distinct): only which way it is counted depends on it."""
    distinct, values = one_row(con.execute(sql("drift_sample_distinct.sql", values=signal.view), {"sample": SAMPLE}))
    return int(distinct) * GROUPED <= int(values)


def bucket_scales(edges: list[float], low: float | None, high: float | None) -> tuple[list[float], list[float]]:
    """Each bin's lower end and KS_BUCKETS / its width (0 for a bin of no width, or one too wide for a
    double), as drift_bucket_macros.sql places values: the first bin runs from the reference's
    smallest value, the last to its largest (values beyond them fall in the end buckets)."""
    if low is None or high is None:
        return [0.0], [0.0]
    ends = [float(low), *edges, float(high)]
    anchors, scales = [], []
    for lower, upper in zip(ends, ends[1:], strict=False):
        width = upper - lower
        scale = KS_BUCKETS / width if math.isfinite(width) and width > 0 else 0.0
        anchors.append(lower)
        scales.append(scale if math.isfinite(scale) else 0.0)
    return anchors, scales


def numeric_signal(con: Connection, signal: Signal) -> tuple[list[float], float | None]:
    """One numeric signal's edges and KS statistic (None when either run has no non-null value),
    its rows per bin into `drift_numeric_counts`, the same numbers either way it is counted
    (tests/test_drift.py checks both against the reference implementation):
    - few distinct values: both runs' rows counted once per value; deciles, bins and KS read from those counts;
    - many: the reference's count, range and deciles, then one pass counting both runs' rows per
      bucket (KS_BUCKETS equal-width buckets per bin, drift_bucket_macros.sql), which gives the bins
      and bounds the KS gap per bucket (drift_ks_bounds.sql), then a sort of only the buckets whose
      bound exceeds the largest exact gap (drift_ks_refine.sql), instead of a sort of every value
      (drift_ks_sorted.sql, when those buckets hold most values)."""
    if few_values(con, signal):
        con.execute(sql("drift_value_counts.sql", values=signal.view))
        m, n = (int(x) for x in one_row(con.execute(sql("drift_value_totals.sql"))))
        edges = merged(one_row(con.execute(sql("drift_value_deciles.sql"), {"ranks": decile_ranks(m)}))[0]) if m else []
        con.execute(sql("drift_value_bins.sql"), {"signal": signal.name, "padded": padded(edges)})
        if m == 0 or n == 0:
            return edges, None
        return edges, int(one_row(con.execute(sql("drift_ks_grouped.sql"), {"m": m, "n": n}))[0]) / (m * n)
    m, low, high = one_row(con.execute(sql("drift_reference_range.sql", values=signal.view)))
    m = int(m)
    edges = quantile_edges(con, signal.view, m)
    anchors, scales = bucket_scales(edges, low, high)
    placing = {"padded": padded(edges), "anchors": anchors, "scales": scales, "k": KS_BUCKETS}
    con.execute(sql("drift_buckets.sql", values=signal.view), placing)
    con.execute(sql("drift_bucket_bins.sql"), {"signal": signal.name, "k": KS_BUCKETS})
    n = int(one_row(con.execute(sql("drift_bucket_totals.sql")))[0])
    if m == 0 or n == 0:
        return edges, None
    con.execute(sql("drift_ks_bounds.sql"), {"m": m, "n": n})
    gap, candidates, candidate_values = (int(x) for x in one_row(con.execute(sql("drift_ks_low.sql"))))
    if 2 * candidate_values > m + n:  # most values would be sorted anyway (runs alike value for value): sort them all
        gap = int(one_row(con.execute(sql("drift_ks_sorted.sql", values=signal.view), {"m": m, "n": n}))[0])
    elif candidates:
        gap = max(gap, int(one_row(con.execute(sql("drift_ks_refine.sql", values=signal.view), placing | {"m": m, "n": n}))[0]))
    return edges, gap / (m * n)


def count_bins(con: Connection, signals: Sequence[Signal]) -> tuple[dict[str, list[float]], dict[str, float | None]]:
    """Both runs' rows per bin of every signal into `drift_numeric_counts` and
    `drift_categorical_counts`, one signal at a time; the numeric signals' edges (also as the table
    `drift_edges`) and KS statistics."""
    edges: dict[str, list[float]] = {}
    ks: dict[str, float | None] = {}
    con.execute(sql("drift_bucket_macros.sql"))
    for signal in signals:
        if signal.numeric:
            edges[signal.name], ks[signal.name] = numeric_signal(con, signal)
        else:
            con.execute(sql("drift_categorical_counts.sql", values=signal.view), {"signal": signal.name})
    con.execute(sql("drift_edges.sql"), {"signals": list(edges), "edges": list(edges.values())})
    return edges, ks


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
    con: Connection,
    kind: OwnSignals,
    reference: RunSide,
    current: RunSide,
    slice_columns: Sequence[str],
    reference_name: str,
    min_psi: float = DEFAULT_MIN_PSI,
    representation: Measured | str | None = None,
    min_auc: float = DEFAULT_MIN_AUC,
) -> Drift:
    """metrics.json `drift` of `current` against `reference` (both open on `con`); `representation`
    the representation signal as measured (representation.measure), or why it was skipped (None:
    not asked for)."""
    con.execute(sql("drift_counts.sql"))
    views, skipped = signal_views(con, kind, reference, current, slice_columns)
    edges, ks = count_bins(con, views)
    con.execute(sql("drift_bins.sql"), {"max_values": MAX_VALUES})
    rows = {side.side: int(one_row(con.execute(sql("drift_rows.sql", source=side.predictions)))[0]) for side in (reference, current)}
    m, n = rows["reference"], rows["current"]
    stats = {signal: (int(b), float(psi)) for signal, b, _, _, psi in con.execute(sql("drift_psi.sql")).fetchall()}
    bins = bin_rows(con, edges, m, n)
    names = sorted(stats)
    p = {s: chi_square_p(stats[s][1], m, n, stats[s][0]) for s in names}
    family = names + ([REPRESENTATION] if isinstance(representation, Measured) else [])
    if isinstance(representation, Measured):
        p[REPRESENTATION] = representation.p
    elif representation is not None:
        skipped[REPRESENTATION] = representation
    p_holm = dict(zip(family, holm([p[s] for s in family]), strict=True))
    judged = m >= MIN_ROWS and n >= MIN_ROWS
    reason = (
        None if judged else f"not judged: {min(m, n)} rows in the {'reference' if m < n else 'current'} run (at least {MIN_ROWS} needed)"
    )
    signals: dict[str, DriftSignal | RepresentationSignal] = {}
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
    worst_first = sorted(signals, key=lambda s: (-stats[s][1], s))
    if isinstance(representation, Measured):
        signals[REPRESENTATION] = representation_signal(con, current, representation, p_holm[REPRESENTATION], min_auc)
        worst_first.append(REPRESENTATION)
    drifted = [s for s in worst_first if signals[s].drifted]
    # Nothing judged (too few rows, or no signal both runs supply) is not "no drift": the alarm and
    # the count are null, so a drifted_signals gate fails as a gate on any missing value does.
    any_judged = any(signal.drifted is not None for signal in signals.values())
    return Drift(
        reference=reference_name,
        rows=DriftRows(reference=m, current=n),
        min_psi=min_psi,
        signals={s: signals[s] for s in worst_first},
        drifted=drifted,
        drifted_signals=len(drifted) if any_judged else None,
        alarm=bool(drifted) if any_judged else None,
        skipped=skipped,
        min_auc=min_auc,
    )


def bin_rows(con: Connection, edges: dict[str, list[float]], m: int, n: int) -> dict[str, list[DriftBin]]:
    """Every signal's bins (drift_bin_rows.sql) with their edges (numeric signals) and both runs'
    counts and shares (m, n: the runs' rows)."""
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
    return bins


def representation_signal(con: Connection, current: RunSide, measured: Measured, p_holm: float, min_auc: float) -> RepresentationSignal:
    """drift.signals.representation: judged when both runs have MIN_TEST_ROWS test rows; the
    examples' texts from this run's staged input (none without one)."""
    texts: dict[int, str | None] = {}
    if current.staged is not None and measured.examples:
        wanted = [e["row_index"] for e in measured.examples]
        texts = dict(con.execute(sql("drift_example_texts.sql", staged=current.staged), {"rows": wanted}).fetchall())
    signal = RepresentationSignal(
        auc=measured.auc,
        auc_ci=measured.auc_ci,
        p=measured.p,
        p_holm=p_holm,
        drifted=(measured.auc >= min_auc and p_holm < ALPHA) if measured.judged else None,
        rows=RepresentationSides.model_validate(measured.rows),
        examples=[
            RepresentationExample(**e, text=None if (t := texts.get(e["row_index"])) is None else t[:TEXT_CHARS]) for e in measured.examples
        ],
    )
    if not measured.judged:
        side = min(("reference", "current"), key=lambda k: measured.rows[k]["test"])
        signal.reason = f"not judged: {measured.rows[side]['test']} test rows in the {side} run (at least {MIN_TEST_ROWS} needed)"
    return signal


def recorded_reference(reference: Location) -> RecordedMetrics:
    """The reference run's metrics.json, read tolerantly (an older run's lacks later fields)."""
    return RecordedMetrics.parse(reference.read_json(RunFolder.METRICS)) or RecordedMetrics()


def _finite_or_none(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
