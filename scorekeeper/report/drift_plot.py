"""drift.svg: the worst drift signals' bins, the reference run's share of rows beside this run's
(scorekeeper/report/drift_report.py writes the rest of the report's drift part)."""

from __future__ import annotations

from scorekeeper.metrics.document import DriftBin, MetricsDocument
from scorekeeper.report import plots

SHOWN_SIGNALS = 3  # the worst signals drawn
SHOWN_BINS = 12  # bins per drawn signal (the largest of either run's, the rest summed)


def bin_label(b: DriftBin) -> str:
    """A bin as people read it: a value, `null`, `other`, or a numeric interval."""
    if b.other:
        return "other"
    if b.null:
        return "null"
    if b.lower is None and b.upper is None and b.value is not None:
        return b.value
    if b.lower is None and b.upper is None:
        return "(-inf, +inf)"
    lower = "-inf" if b.lower is None else f"{b.lower:.4g}"
    upper = "+inf)" if b.upper is None else f"{b.upper:.4g}]"
    return f"({lower}, {upper}"


def drift_svg(document: MetricsDocument) -> str:
    """The worst signals' bins, both runs' shares side by side; empty without drift."""
    drift = document.drift
    if drift is None or not drift.binned():
        return ""
    shown = list(drift.binned().items())[:SHOWN_SIGNALS]
    panel_w, panel_h, top = 360, 230, 56
    c = plots.Canvas(panel_w * len(shown) + 20, top + panel_h + 70, "Drift: the worst signals")
    plots.title(c, "Drift: the worst signals", f"share of rows per bin; reference run {drift.reference} against this run")
    c.rect(panel_w * len(shown) - 250, 12, 12, 10, plots.MUTED)
    c.text(panel_w * len(shown) - 234, 21, "reference", size=11)
    c.rect(panel_w * len(shown) - 160, 12, 12, 10, plots.CORRECT)
    c.text(panel_w * len(shown) - 144, 21, "this run", size=11)
    for k, (name, s) in enumerate(shown):
        bins = _bins_shown(s.bins)
        peak = max([max(b[1], b[2]) for b in bins] + [0.01])
        x0 = 20 + k * panel_w
        a = plots.Area(c, x0 + 30, top + 20, panel_w - 60, panel_h - 40, xlim=(0, len(bins)), ylim=(0, peak))
        a.axes("", "", [], [0, round(peak / 2, 3), round(peak, 3)])
        verdict = "drifted" if s.drifted else "not judged" if s.drifted is None else "no drift"
        c.text(x0, top + 8, plots.short(f"{name}: PSI {s.psi:.3g} ({verdict})", 48), size=12, weight="600", title=name)
        width = (panel_w - 60) / len(bins)
        for i, (label, ref, cur) in enumerate(bins):
            x = a.px(i)
            c.rect(x + width * 0.1, a.py(ref), width * 0.38, a.py(0) - a.py(ref), plots.MUTED, title=f"{label}: reference {ref:.1%}")
            c.rect(x + width * 0.5, a.py(cur), width * 0.38, a.py(0) - a.py(cur), plots.CORRECT, title=f"{label}: this run {cur:.1%}")
            c.text(x + width / 2, a.y + a.h + 12, plots.short(label, 14), size=9, anchor="end", rotate=-40, color=plots.MUTED, title=label)
    return c.svg()


def _bins_shown(bins: list[DriftBin]) -> list[tuple[str, float, float]]:
    """(label, reference share, current share) per bin; past SHOWN_BINS the largest kept, the rest summed."""
    rows = [(bin_label(b), b.reference, b.current) for b in bins]
    if len(rows) <= SHOWN_BINS:
        return rows
    kept = sorted(range(len(rows)), key=lambda i: -max(rows[i][1], rows[i][2]))[: SHOWN_BINS - 1]
    rest = [rows[i] for i in range(len(rows)) if i not in kept]
    return [rows[i] for i in sorted(kept)] + [(f"{len(rest)} more", sum(r[1] for r in rest), sum(r[2] for r in rest))]
