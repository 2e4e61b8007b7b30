"""The report's plots as hand-written SVG: the typed metrics document in, one self-contained <svg> string out.

Each plot draws its own white background (Prefect's UI is dark), axes with ticks and labels, and
a title inside its own box, so it reads the same inline in report.html, as a file, or as a
data URL in a Prefect artifact. Every text is escaped. A plot whose data is absent is "".
"""

from __future__ import annotations

import base64
import math

from scorekeeper.escape import html_text
from scorekeeper.metrics.document import (
    ClassAreas,
    ClassScores,
    HistoryEntry,
    LabelAreas,
    LabelScores,
    MacroMicro,
    MetricsDocument,
    PredictedPoints,
    RocCurve,
)
from scorekeeper.metrics.registry import history_columns, number_at

FONT = "system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#7f7f7f"]
CORRECT, WRONG, INK, GRID, MUTED = "#4e79a7", "#e15759", "#222", "#e4e4e4", "#666"
MAX_CURVES = 10  # classes drawn in one ROC/PR plot (most support first); a legend of 50 is unreadable
CONFUSION_TOP = 15  # labels shown in the confusion matrix; the rest are grouped


def esc(text) -> str:
    """A text from the data inside the SVG: the one HTML escaping (scorekeeper/escape.py)."""
    return html_text(text)


def short(text, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def data_url(svg: str) -> str:
    """The plot as a data: URL (what Prefect's UI shows in image and markdown artifacts)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def _n(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


class Canvas:
    """An SVG of a fixed size with a white background; plot areas map data to pixels."""

    def __init__(self, width: float, height: float, title: str):
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []

    def add(self, part: str) -> None:
        self.parts.append(part)

    def text(self, x, y, text, size=11, anchor="start", color=INK, weight="normal", rotate=None, title=None) -> None:
        transform = f' transform="rotate({rotate} {_n(x)} {_n(y)})"' if rotate else ""
        tip = f"<title>{esc(title)}</title>" if title else ""
        self.add(
            f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" fill="{color}" '
            f'font-weight="{weight}"{transform}>{tip}{esc(text)}</text>'
        )

    def line(self, x1, y1, x2, y2, color=INK, width=1.0, dash=None) -> None:
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{color}" stroke-width="{width}"{dashes}/>')

    def rect(self, x, y, w, h, fill, title=None, stroke=None) -> None:
        tip = f"<title>{esc(title)}</title>" if title else ""
        edge = f' stroke="{stroke}"' if stroke else ""
        self.add(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0))}" height="{_n(max(h, 0))}" fill="{fill}"{edge}>{tip}</rect>')

    def polyline(self, points, color, width=1.8, title=None) -> None:
        tip = f"<title>{esc(title)}</title>" if title else ""
        coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        self.add(
            f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="{width}" stroke-linejoin="round">{tip}</polyline>'
        )

    def circle(self, x, y, r, fill, title=None) -> None:
        tip = f"<title>{esc(title)}</title>" if title else ""
        self.add(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{r}" fill="{fill}">{tip}</circle>')

    def svg(self) -> str:
        w, h = _n(self.width), _n(self.height)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="{FONT}" role="img" aria-label="{esc(self.title)}">'
            f'<rect width="100%" height="100%" fill="#fff"/>' + "".join(self.parts) + "</svg>"
        )


class Area:
    """A rectangle of a canvas with data ranges on both axes."""

    def __init__(self, canvas: Canvas, x: float, y: float, w: float, h: float, xlim=(0.0, 1.0), ylim=(0.0, 1.0)):
        self.c, self.x, self.y, self.w, self.h, self.xlim, self.ylim = canvas, x, y, w, h, xlim, ylim

    def px(self, v: float) -> float:
        lo, hi = self.xlim
        return self.x + (v - lo) / ((hi - lo) or 1) * self.w

    def py(self, v: float) -> float:
        lo, hi = self.ylim
        return self.y + self.h - (v - lo) / ((hi - lo) or 1) * self.h

    def axes(self, xlabel: str, ylabel: str, xticks, yticks, xfmt="{:g}", yfmt="{:g}") -> None:
        c = self.c
        for t in yticks:
            c.line(self.x, self.py(t), self.x + self.w, self.py(t), GRID)
            c.text(self.x - 6, self.py(t) + 4, yfmt.format(t), size=10, anchor="end", color=MUTED)
        for t in xticks:
            c.line(self.px(t), self.y + self.h, self.px(t), self.y + self.h + 4, MUTED)
            c.text(self.px(t), self.y + self.h + 16, xfmt.format(t), size=10, anchor="middle", color=MUTED)
        c.line(self.x, self.y + self.h, self.x + self.w, self.y + self.h, INK)
        c.line(self.x, self.y, self.x, self.y + self.h, INK)
        c.text(self.x + self.w / 2, self.y + self.h + 34, xlabel, anchor="middle")
        c.text(self.x - 40, self.y + self.h / 2, ylabel, anchor="middle", rotate=-90)


TENTHS = [i / 10 for i in range(0, 11, 2)]


def title(c: Canvas, text: str, sub: str = "") -> None:
    c.text(12, 20, text, size=14, weight="600")
    if sub:
        c.text(12, 37, sub, size=11, color=MUTED)


def reliability_svg(metrics: MetricsDocument) -> str:
    """Accuracy per confidence bin against the diagonal, with each bin's row count below."""
    bins = metrics.calibration or []
    if not bins:
        return ""
    n_bins = metrics.ece_bins or len(bins)
    c = Canvas(440, 450, "Reliability diagram")
    ece = number_at(metrics, ("ece",))  # a single-label run's one number
    title(c, "Reliability diagram", f"ECE {ece:.4f} over {n_bins} equal-width bins" if ece is not None else f"{n_bins} bins")
    a = Area(c, 64, 52, 340, 260)
    a.axes("confidence (probability of the predicted label)", "accuracy", TENTHS, TENTHS)
    a.c.line(a.px(0), a.py(0), a.px(1), a.py(1), MUTED, dash="5 4")
    counts = Area(c, 64, 362, 340, 44, ylim=(0, max(b.rows for b in bins) or 1))
    for b in bins:
        lower, upper = b.lower, b.upper
        x, w = a.px(lower) + 1, a.px(upper) - a.px(lower) - 2
        acc = b.accuracy or 0.0
        confidence = b.confidence or 0.0  # a bin with rows has a mean confidence
        tip = f"confidence {lower:.2f}-{upper:.2f}: {b.rows} rows, mean confidence {confidence:.3f}, accuracy {acc:.3f}"
        c.rect(x, a.py(acc), w, a.py(0) - a.py(acc), CORRECT, title=tip)
        c.line(x, a.py(confidence), x + w, a.py(confidence), WRONG, width=2)
        c.rect(x, counts.py(b.rows), w, counts.py(0) - counts.py(b.rows), "#9bb3d4", title=tip)
        c.text(x + w / 2, counts.py(b.rows) - 3, f"{b.rows}", size=8, anchor="middle", color=MUTED)
    c.line(counts.x, counts.py(0), counts.x + counts.w, counts.py(0), INK)
    c.text(counts.x - 6, counts.y + counts.h / 2 + 4, "rows", size=10, anchor="end", color=MUTED)
    c.text(counts.x, counts.y + counts.h + 18, "rows per bin", size=10, color=MUTED)
    c.rect(250, 28, 12, 10, CORRECT)
    c.text(266, 37, "accuracy", size=10)
    c.line(324, 33, 338, 33, WRONG, width=2)
    c.text(342, 37, "mean confidence", size=10)
    return c.svg()


def confusion_cells(metrics: MetricsDocument, top: int = CONFUSION_TOP) -> tuple[list[str], list[list[int]], int]:
    """(names, counts[truth][pred], labels grouped): the `top` labels by support, the others summed
    into one last "other" row and column, so 50 labels still fit a page."""
    confusion = metrics.confusion or {}
    names = list(dict.fromkeys(list(metrics.per_class or {}) + list(confusion)))
    for row in confusion.values():
        names += [p for p in row if p not in names]
    if not names:
        return [], [], 0
    support = {t: sum(confusion.get(t, {}).values()) for t in names}
    grouped = 0
    if len(names) > top:
        keep = set(sorted(names, key=lambda t: (-support[t], t))[: top - 1])
        grouped = len(names) - len(keep)
        shown = [t for t in names if t in keep]
        other = f"other ({grouped} labels)"
    else:
        shown, other = names, None
    index = {t: i for i, t in enumerate(shown)}
    size = len(shown) + (1 if other else 0)
    counts = [[0] * size for _ in range(size)]
    for t, row in confusion.items():
        for p, n in row.items():
            counts[index.get(t, size - 1)][index.get(p, size - 1)] += n
    return shown + ([other] if other else []), counts, grouped


def confusion_svg(metrics: MetricsDocument, top: int = CONFUSION_TOP) -> str:
    """Counts per (truth, prediction), coloured by the share of the truth row (recall on the diagonal)."""
    names, counts, grouped = confusion_cells(metrics, top)
    if not names:
        return ""
    k = len(names)
    cell = 52 if k <= 8 else 40 if k <= 12 else 34
    longest = min(max(len(n) for n in names), 22)
    left = 40 + 6.5 * longest
    top_pad = 74 + 5 * longest  # rotated column labels
    width = max(left + cell * k + 20, 460)
    height = top_pad + cell * k + 52
    c = Canvas(width, height, "Confusion matrix")
    sub = "rows: truth, columns: prediction; colour and % = share of the truth row"
    title(c, "Confusion matrix", sub)
    if grouped:
        c.text(
            12,
            height - 14,
            f"{k - 1} labels with the most rows shown; the other {grouped} are summed into the last row/column.",
            11,
            color=MUTED,
        )
    for j, p in enumerate(names):
        x = left + j * cell + cell / 2
        c.text(x + 4, top_pad - 8, short(p, 22), size=11, rotate=-45, title=p)
    for i, t in enumerate(names):
        total = sum(counts[i]) or 1
        y = top_pad + i * cell
        c.text(left - 8, y + cell / 2 + 4, short(t, 22), size=11, anchor="end", title=t)
        for j, p in enumerate(names):
            n = counts[i][j]
            share = n / total
            light = round(255 - 200 * share)
            fill = (
                f"rgb({light},{round(255 - 150 * share)},255)"
                if i != j or n == 0
                else f"rgb({light},{round(255 - 120 * share)},{round(255 - 170 * share)})"
            )
            c.rect(
                left + j * cell, y, cell, cell, fill, title=f"truth {t}, predicted {p}: {n} rows ({share:.1%} of the row)", stroke="#fff"
            )
            ink = "#fff" if share > 0.55 else INK
            if n:
                c.text(
                    left + j * cell + cell / 2,
                    y + cell / 2 + (0 if cell >= 40 else 4),
                    f"{n}",
                    size=11 if cell >= 40 else 10,
                    anchor="middle",
                    color=ink,
                )
                if cell >= 40:
                    c.text(left + j * cell + cell / 2, y + cell / 2 + 14, f"{share:.0%}", size=9, anchor="middle", color=ink)
    c.text(left + cell * k / 2, top_pad + cell * k + 20, "predicted label", size=11, anchor="middle", color=MUTED)
    return c.svg()


def _classes_by_support(metrics: MetricsDocument, names) -> list[str]:
    per: dict[str, ClassScores] | dict[str, LabelScores] = metrics.per_class or metrics.per_label or {}
    support = {n: per[n].support if n in per else 0 for n in names}
    return sorted(names, key=lambda n: (-support[n], n))[:MAX_CURVES]


def curve_svg(metrics: MetricsDocument, kind: str) -> str:
    """ROC (kind "roc") or precision-recall ("pr") curves, one per class (most support first)."""
    if metrics.curves is None:
        return ""
    roc = kind == "roc"
    curves = metrics.curves.roc if roc else metrics.curves.pr
    if not curves:
        return ""
    area = metrics.roc_auc if roc else metrics.average_precision
    per_label = isinstance(area, LabelAreas)
    per_class = (area.per_label if isinstance(area, LabelAreas) else area.per_class if isinstance(area, ClassAreas) else None) or {}
    shown = _classes_by_support(metrics, list(curves))
    name = "ROC" if roc else "Precision-recall"
    macro = area.macro if area else None
    how = "per label" if per_label else "one-vs-rest"
    sub = f"{how}; macro {'ROC-AUC' if roc else 'average precision'} {macro:.4f}" if macro is not None else how
    if len(curves) > len(shown):
        sub += f"; {len(shown)} of {len(curves)} {'labels' if per_label else 'classes'} (most rows)"
    c = Canvas(560, 400, f"{name} curves")
    title(c, f"{name} curves", sub)
    a = Area(c, 64, 52, 290, 290)
    a.axes("false positive rate" if roc else "recall", "true positive rate" if roc else "precision", TENTHS, TENTHS)
    if roc:
        c.line(a.px(0), a.py(0), a.px(1), a.py(1), MUTED, dash="5 4")
    c.text(372, 62, "class", size=10, color=MUTED)
    c.text(548, 62, "AUC" if roc else "AP", size=10, anchor="end", color=MUTED)
    for i, label in enumerate(shown):
        color = PALETTE[i % len(PALETTE)]
        curve = curves[label]
        xs, ys = (curve.fpr, curve.tpr) if isinstance(curve, RocCurve) else (curve.recall, curve.precision)
        value = per_class.get(label)
        tip = f"{label}: {'AUC' if roc else 'AP'} {value:.4f}" if value is not None else label
        c.polyline([(a.px(x), a.py(y)) for x, y in zip(xs, ys, strict=False)], color, title=tip)
        y = 80 + i * 18
        c.rect(372, y - 9, 14, 4, color)
        c.text(392, y - 3, short(label, 18), size=11, title=label)
        c.text(548, y - 3, f"{value:.3f}" if value is not None else "n/a", size=11, anchor="end")
    return c.svg()


def score_histogram_svg(metrics: MetricsDocument) -> str:
    """Where the scores of correct and of wrong rows fall, each as a share of its own group."""
    hist = metrics.score_histogram
    if not hist or not hist.edges:
        return ""
    edges, right, wrong = hist.edges, hist.correct, hist.wrong
    n_right, n_wrong = sum(right), sum(wrong)
    shares = [[v / (n_right or 1) for v in right], [v / (n_wrong or 1) for v in wrong]]
    peak = max(max(shares[0]), max(shares[1])) or 1
    step = 0.1 if peak <= 0.5 else 0.2
    top = math.ceil(peak / step) * step
    c = Canvas(520, 380, "Score histogram")
    title(c, "Scores of correct and wrong rows", "score = probability of the predicted label; bars = share of each group")
    a = Area(c, 64, 52, 420, 260, ylim=(0, top))
    yticks = [round(i * step, 2) for i in range(int(round(top / step)) + 1)]
    a.axes("score", "share of the group's rows", TENTHS, yticks, yfmt="{:.0%}")
    for b in range(len(edges) - 1):
        x0, x1 = a.px(edges[b]), a.px(edges[b + 1])
        w = (x1 - x0 - 2) / 2
        for g, (values, color, name) in enumerate(((right, CORRECT, "correct"), (wrong, WRONG, "wrong"))):
            v = shares[g][b]
            tip = f"{name}, score {edges[b]:.2f}-{edges[b + 1]:.2f}: {values[b]} rows ({v:.1%})"
            c.rect(x0 + 1 + g * w, a.py(v), w, a.py(0) - a.py(v), color, title=tip)
    c.rect(90, 62, 12, 10, CORRECT)
    c.text(106, 71, f"correct ({n_right:,} rows)", size=11)
    c.rect(90, 80, 12, 10, WRONG)
    c.text(106, 89, f"wrong ({n_wrong:,} rows)", size=11)
    return c.svg()


def coverage_svg(metrics: MetricsDocument) -> str:
    """Accuracy of the rows kept above each confidence threshold against the share kept."""
    points = [(t, t.accuracy) for t in metrics.thresholds or [] if t.accuracy is not None and t.rows]
    if not points:
        return ""
    low = min(accuracy for _, accuracy in points)
    floor = max(0.0, math.floor(low * 10 - 0.5) / 10)
    c = Canvas(460, 380, "Coverage and accuracy")
    title(c, "Coverage vs accuracy", "rows kept when predictions scoring below a threshold are set aside")
    a = Area(c, 64, 56, 360, 256, ylim=(floor, 1.0))
    yticks = [round(floor + i * 0.1, 1) for i in range(int(round((1 - floor) * 10)) + 1)]
    if len(yticks) > 7:
        yticks = yticks[::2]
    a.axes("coverage (share of rows kept)", "accuracy of kept rows", TENTHS, yticks, xfmt="{:.0%}")
    pts = [(a.px(t.coverage), a.py(accuracy)) for t, accuracy in points]
    c.polyline(pts, CORRECT, width=2)
    labelled: list[tuple[float, float]] = []
    for (t, accuracy), (x, y) in zip(points, pts, strict=True):
        tip = f"threshold {t.threshold:g}: {t.rows} rows kept ({t.coverage:.1%}), accuracy {accuracy:.4f}"
        c.circle(x, y, 3.5, CORRECT, title=tip)
        if all(abs(x - lx) > 40 or abs(y - ly) > 12 for lx, ly in labelled):  # thresholds that keep the same rows share a point
            c.text(x - 6, y + 14, f"≥{t.threshold:g}", size=9, anchor="end" if x > a.x + 40 else "start", color=MUTED)
            labelled.append((x, y))
    return c.svg()


def model_of(run: HistoryEntry) -> tuple:
    """What "model changed" compares: the base weights and the adapter."""
    return run.model_fingerprint, run.adapter_fingerprint


def history_svg(metrics: MetricsDocument) -> str:
    """The history metrics (accuracy and macro F1 of a single-label run) of the completed runs
    under the same output, oldest first."""
    shown = history_columns(metrics.head, metrics.history or [])
    columns = [m for m in shown if not m.count]
    counts = [m for m in shown if m.count]  # drifted_signals: marked on the axis, not drawn
    runs = [r for r in metrics.history or [] if columns and columns[0].value(r) is not None]
    if len(runs) < 2:
        return ""
    values = [v for r in runs for m in columns if (v := m.value(r)) is not None]
    lo = max(0.0, math.floor(min(values) * 20 - 1) / 20)
    hi = min(1.0, math.ceil(max(values) * 20 + 1) / 20)
    c = Canvas(760, 340, "Run history")
    title(c, "History", f"the last {len(runs)} completed runs under this output, oldest first; ▲ = model changed")
    a = Area(c, 120, 56, 520, 200, xlim=(0, len(runs) - 1), ylim=(lo, hi))
    steps = max(1, round((hi - lo) / 0.05))
    yticks = [round(lo + i * (hi - lo) / steps, 3) for i in range(steps + 1)]
    if len(yticks) > 7:
        yticks = yticks[::2]
    a.axes("", "", [], yticks)
    for i, r in enumerate(runs):
        x = a.px(i)
        c.line(x, a.y + a.h, x, a.y + a.h + 4, MUTED)
        c.text(x + 3, a.y + a.h + 14, short(r.run_id, 24), size=9, anchor="end", rotate=-30, color=MUTED, title=r.run_id)
        for count in counts:
            if n := count.value(r):
                c.text(x, a.y + a.h - 6, f"⚠{n:g}", size=10, anchor="middle", color=WRONG, title=f"{r.run_id}: {count.name} {n:g}")
        if i and model_of(r) != model_of(runs[i - 1]):
            c.line(x, a.y, x, a.y + a.h, "#bbb", dash="3 3")
            c.text(x, a.y - 3, "▲", size=9, anchor="middle", color=MUTED, title="model changed")
    for k, metric in enumerate(columns):
        color = CORRECT if k == 0 else PALETTE[k % len(PALETTE)]
        pts = [(a.px(i), a.py(v), r, v) for i, r in enumerate(runs) if (v := metric.value(r)) is not None]
        c.polyline([(x, y) for x, y, _, _ in pts], color, width=2)
        for x, y, r, v in pts:
            c.circle(x, y, 3.5 if r is not runs[-1] else 5, color, title=f"{r.run_id}: {metric.name} {v:.4f}")
        c.rect(660, 66 + 20 * k, 14, 4, color)
        c.text(680, 72 + 20 * k, metric.name.replace("_", " "), size=11)
    return c.svg()


def interval_svg(value: float | None, ci, reference: float | None = None, width: int = 180, scale: float = 1.0) -> str:
    """A small 0-`scale` axis with the value as a dot, its interval as a bar and a reference line."""
    if value is None:
        return ""
    h, pad = 16, 4
    inner = width - 2 * pad

    def x(v: float) -> str:
        return _n(pad + max(0.0, min(1.0, v / scale)) * inner)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" viewBox="0 0 {width} {h}" aria-hidden="true">']
    parts.append(f'<line x1="{pad}" y1="8" x2="{width - pad}" y2="8" stroke="{GRID}" stroke-width="2"/>')
    if reference is not None:
        parts.append(f'<line x1="{x(reference)}" y1="1" x2="{x(reference)}" y2="15" stroke="{MUTED}" stroke-dasharray="2 2"/>')
    if ci:
        parts.append(f'<line x1="{x(ci[0])}" y1="8" x2="{x(ci[1])}" y2="8" stroke="{CORRECT}" stroke-width="4" stroke-opacity="0.45"/>')
    parts.append(f'<circle cx="{x(value)}" cy="8" r="3.5" fill="{CORRECT}"/></svg>')
    return "".join(parts)


def label_calibration_svg(metrics: MetricsDocument) -> str:
    """Multi-label: per label, the share of true cells against the mean probability in each bin."""
    bins = metrics.label_calibration
    if not bins:
        return ""
    shown = _classes_by_support(metrics, [name for name, rows in bins.items() if rows])
    ece = metrics.ece if isinstance(metrics.ece, MacroMicro) else None  # a multi-label run's macro and micro
    per_label = (ece.per_label if ece else None) or {}
    macro, micro = (ece.macro, ece.micro) if ece else (None, None)
    sub = f"ECE macro {macro:.4f}, micro {micro:.4f}" if macro is not None and micro is not None else ""
    if len(bins) > len(shown):
        sub += f"; {len(shown)} of {len(bins)} labels (most rows)"
    c = Canvas(560, 400, "Calibration per label")
    title(c, "Calibration per label", sub)
    a = Area(c, 64, 52, 290, 290)
    a.axes("mean probability in the bin", "share of the bin's cells that are true", TENTHS, TENTHS)
    c.line(a.px(0), a.py(0), a.px(1), a.py(1), MUTED, dash="5 4")
    c.text(372, 62, "label", size=10, color=MUTED)
    c.text(548, 62, "ECE", size=10, anchor="end", color=MUTED)
    for i, label in enumerate(shown):
        color = PALETTE[i % len(PALETTE)]
        drawn = [(b, b.confidence or 0.0, b.frequency or 0.0) for b in bins[label]]  # a bin with cells has both
        points = [(a.px(confidence), a.py(frequency)) for _, confidence, frequency in drawn]
        c.polyline(points, color, title=label)
        for (b, confidence, frequency), (x, y) in zip(drawn, points):
            c.circle(x, y, 2.5, color, title=f"{label}: {b.rows} cells, mean probability {confidence:.3f}, true {frequency:.3f}")
        y = 80 + i * 18
        c.rect(372, y - 9, 14, 4, color)
        c.text(392, y - 3, short(label, 18), size=11, title=label)
        value = per_label.get(label)
        c.text(548, y - 3, f"{value:.3f}" if value is not None else "n/a", size=11, anchor="end")
    return c.svg()


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _span(values) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.04 or abs(hi) * 0.1 or 1.0
    return lo - pad, hi + pad


def predicted_vs_true_svg(metrics: MetricsDocument, output: str) -> str:
    """Regression: each row's prediction against its truth (a 2-D histogram past a few thousand rows)."""
    data = (metrics.predicted_vs_true or {}).get(output)
    if not data:
        return ""
    c = Canvas(460, 420, "Predicted vs true")
    if isinstance(data, PredictedPoints):
        lim = _span(data.truth + data.prediction)
        sub = f"{len(data.truth):,} rows; the dashed line is prediction = truth"
    else:
        lim = (data.lo, data.hi) if data.hi > data.lo else _span([data.lo])
        sub = f"{sum(n for *_, n in data.cells):,} rows in {data.bins}x{data.bins} cells (darker: more rows)"
    title(c, f"Predicted vs true: {short(output, 30)}", sub)
    a = Area(c, 70, 52, 340, 300, xlim=lim, ylim=lim)
    ticks = _ticks(*lim)
    a.axes("truth", "prediction", ticks, ticks, xfmt="{:.3g}", yfmt="{:.3g}")
    if isinstance(data, PredictedPoints):
        for t, p in zip(data.truth, data.prediction):
            c.circle(a.px(t), a.py(p), 2, CORRECT + "99")
    else:
        width = (lim[1] - lim[0]) / data.bins
        peak = max(n for *_, n in data.cells)
        for tb, pb, n in data.cells:
            x0, y0 = lim[0] + tb * width, lim[0] + pb * width
            shade = 0.15 + 0.85 * math.log1p(n) / math.log1p(peak)
            tip = f"truth {x0:.3g} to {x0 + width:.3g}, prediction {y0:.3g} to {y0 + width:.3g}: {n} rows"
            c.rect(
                a.px(x0),
                a.py(y0 + width),
                a.px(x0 + width) - a.px(x0),
                a.py(y0) - a.py(y0 + width),
                f"rgba(78,121,167,{shade:.2f})",
                title=tip,
            )
    c.line(a.px(lim[0]), a.py(lim[0]), a.px(lim[1]), a.py(lim[1]), WRONG, dash="5 4")
    return c.svg()


def residual_histogram_svg(metrics: MetricsDocument, output: str) -> str:
    """Regression: how the residuals (prediction - truth) are spread."""
    hist = (metrics.residual_histogram or {}).get(output)
    if not hist:
        return ""
    edges, counts = hist.edges, hist.counts
    lim = (edges[0], edges[-1]) if edges[-1] > edges[0] else _span([edges[0]])
    c = Canvas(460, 380, "Residuals")
    title(c, f"Residuals: {short(output, 30)}", f"prediction - truth, {len(counts)} equal-width bins")
    peak = max(counts) or 1
    a = Area(c, 70, 52, 350, 260, xlim=lim, ylim=(0, peak))
    a.axes("residual (prediction - truth)", "rows", _ticks(*lim), _ticks(0, peak, 4), xfmt="{:.3g}", yfmt="{:.0f}")
    if edges[-1] > edges[0]:
        for b, n in enumerate(counts):
            x0, x1 = a.px(edges[b]), a.px(edges[b + 1])
            c.rect(x0 + 0.5, a.py(n), x1 - x0 - 1, a.py(0) - a.py(n), CORRECT, title=f"{edges[b]:.4g} to {edges[b + 1]:.4g}: {n} rows")
    else:
        c.rect(a.px(edges[0]) - 4, a.py(counts[0]), 8, a.py(0) - a.py(counts[0]), CORRECT, title=f"{edges[0]:.4g}: {counts[0]} rows")
    if lim[0] <= 0 <= lim[1]:
        c.line(a.px(0), a.py(0), a.px(0), a.py(peak), WRONG, dash="5 4")
    return c.svg()


def deciles_svg(metrics: MetricsDocument, output: str) -> str:
    """Regression: mean truth against mean prediction in each decile of the predictions."""
    deciles = [(d, d.mean_prediction, d.mean_truth) for d in (metrics.calibration_deciles or {}).get(output) or []]
    drawn = [(d, p, t) for d, p, t in deciles if p is not None and t is not None]  # a decile with rows has both
    if not deciles:
        return ""
    lim = _span([p for _, p, _ in drawn] + [t for _, _, t in drawn])
    c = Canvas(460, 400, "Calibration by decile")
    title(c, f"Calibration by decile: {short(output, 30)}", "rows cut into 10 groups by prediction; calibrated: on the dashed line")
    a = Area(c, 70, 52, 340, 290, xlim=lim, ylim=lim)
    ticks = _ticks(*lim)
    a.axes("mean prediction", "mean truth", ticks, ticks, xfmt="{:.3g}", yfmt="{:.3g}")
    c.line(a.px(lim[0]), a.py(lim[0]), a.px(lim[1]), a.py(lim[1]), MUTED, dash="5 4")
    points = [(a.px(p), a.py(t)) for _, p, t in drawn]
    c.polyline(points, CORRECT)
    for (d, p, t), (x, y) in zip(drawn, points):
        tip = f"decile {d.decile}: {d.rows} rows, mean prediction {p:.4g}, mean truth {t:.4g}"
        c.circle(x, y, 3.5, CORRECT, title=tip)
    return c.svg()
