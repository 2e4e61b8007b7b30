"""Text for people from a metrics document: number formats, the headline, the slices' order, the
fan-out table and the plots. Shared by report.md, report.html (scorekeeper/report/report.py) and the
Prefect artifacts (tasks/artifacts.py); pure functions on the typed metrics document
(scorekeeper/metrics/document.py) as metrics.json holds it (`MetricsDocument.finite`), importing
nothing of the flow's steps.

Which metrics the headline and the slice tables show, under which names and which way is better all
come from the metric registry (scorekeeper/metrics/registry.py).
"""

from __future__ import annotations

from scorekeeper.escape import md_text
from scorekeeper.metrics.document import LabelSliceGroup, MetricsDocument, RegressionSliceGroup, SliceGroup
from scorekeeper.metrics.registry import Headline, Metric, SliceMetric, headline_metrics, number_at, value_at
from scorekeeper.numbers import readable
from scorekeeper.report import drift_plot, plots
from scorekeeper.scoring_summary import ScoringSummary

Group = SliceGroup | LabelSliceGroup | RegressionSliceGroup


def fmt(value, digits: int = 4) -> str:
    """A value as the report shows it (scorekeeper/numbers.py: scientific past 1e6 or below 1e-4)."""
    return readable(value, digits) if isinstance(value, float) or value is None else str(value)


def ci(interval, digits: int = 4) -> str:
    """An interval's ends, each as `fmt` shows a value (scientific past 1e6 or below 1e-4)."""
    return f"[{readable(interval[0], digits)}, {readable(interval[1], digits)}]" if interval else ""


def signed(value, digits: int = 4) -> str:
    """A change with its sign, as `fmt` shows a value (scientific past 1e6 or below 1e-4)."""
    if value is None:
        return "n/a"
    shown = readable(float(value), digits)
    return shown if shown == "n/a" or shown.startswith("-") else "+" + shown


def md(text) -> str:
    """A value from the data in markdown (a table cell too): escaped, never rendered (scorekeeper/escape.py)."""
    return md_text(text)


def shown_metrics(metrics: MetricsDocument) -> list[tuple[Metric, object]]:
    """The headline's metrics of this run with their values, in the registry's order: none in a
    scoring-only run; `if defined` ones only when they have a value."""
    if metrics.scoring_only:
        return []
    shown = []
    for metric in headline_metrics(metrics.head):
        if metric.headline == Headline.IF_DEFINED and number_at(metrics, metric.path) is None:
            continue
        shown.append((metric, value_at(metrics, metric.path)))
    return shown


def headline(metrics: MetricsDocument) -> list[tuple[str, str]]:
    """(name, text) rows: the counts, then the headline metrics (their intervals beside them)."""
    rows = [("rows", fmt(metrics.rows)), ("scored", fmt(metrics.scored)), ("evaluated", fmt(metrics.evaluated))]
    for metric, value in shown_metrics(metrics):
        text = fmt(value)
        interval = value_at(metrics, metric.interval) if metric.interval else None
        if interval:
            text += f" (95% CI {ci(interval)})"
        rows.append((metric.name, text))
    return rows


def cards(metrics: MetricsDocument) -> list[dict]:
    """The report's headline cards (the scores, not the row counts): name, value, JSON path, and an
    interval with its path where there is one."""
    made = []
    for metric, value in shown_metrics(metrics):
        if metric.count:
            continue
        card = {"name": metric.label, "value": value, "key": list(metric.path)}
        if metric.interval:
            card |= {"ci": value_at(metrics, metric.interval), "ci_key": list(metric.interval)}
        made.append(card)
    return made


def sorted_slices(values: dict[str, Group], shown: SliceMetric) -> list[tuple[str, Group]]:
    """A slice column's groups, worst first by `shown` (then most rows); groups without it last."""
    sign = -1.0 if shown.lower_is_better else 1.0
    return sorted(values.items(), key=lambda kv: (shown.of(kv[1]) is None, sign * (shown.of(kv[1]) or 0.0), -kv[1].rows))


def slice_scale(shown: SliceMetric, groups: list[tuple[str, Group]], reference: float | None) -> float:
    """The upper end of a slice bar's scale: 1 for a share, else the largest value or interval end shown."""
    if not shown.lower_is_better:
        return 1.0
    ends = [reference or 0.0] + [max(shown.of(s) or 0.0, *(shown.interval_of(s) or [])) for _, s in groups]
    return max(ends) or 1.0


def slice_note(metrics: MetricsDocument, shown: tuple[SliceMetric, ...], caption: str | None, intervals: bool) -> str:
    """The sentence above the slice tables: what they show (`caption`, or the metrics' names with
    their intervals), their order, their intervals, the dashed line."""
    key = shown[0].key
    overall = shown[0].overall(metrics)
    line = f" The dashed line is the overall {key}" + (f" ({fmt(overall)})." if overall is not None else ".")
    if caption:
        with_intervals = f", with {shown[0].how} 95% intervals" if intervals else ""
        return f"{caption} by the values of each slice column, worst first{with_intervals}." + line
    order = f"largest {key} first" if shown[0].lower_is_better else f"worst {key} first"
    names = " and ".join(f"{s.key} ({s.how} 95% interval)" for s in shown)
    several = " (the mean of the outputs')" if len(metrics.outputs or []) > 1 else ""
    return f"{names}{several} by the values of each slice column, {order}." + line


def spans(indices: list[int]) -> str:
    """Range indices as compact spans: [0, 1, 2, 5] -> '0-2, 5'."""
    parts: list[tuple[int, int]] = []
    for i in sorted(indices):
        if parts and i == parts[-1][1] + 1:
            parts[-1] = (parts[-1][0], i)
        else:
            parts.append((i, i))
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in parts)


GROUP_HEADER = ("group", "worker (machine)", "ranges", "rows", "rows/s", "attempts")


def group_rows(scoring: ScoringSummary | None) -> list[tuple[str, ...]]:
    """One row per group of a fanned-out run (fan_out > 1): which machine scored which ranges, how
    fast; none for a run scored on one machine."""
    rows: list[tuple[str, ...]] = []
    for g in (scoring.groups if scoring else None) or []:
        where = (g.worker or "?") + (f" ({g.machine})" if g.machine else "")
        rows.append((str(g.group), where, spans(g.ranges), str(g.rows), fmt(g.rows_per_s, 1), str(g.attempts)))
    return rows


def plot_files(metrics: MetricsDocument) -> dict[str, str]:
    """The report's plots by file name; absent data gives no file."""
    made = {
        "confusion.svg": plots.confusion_svg(metrics),
        "reliability.svg": plots.reliability_svg(metrics),
        "roc.svg": plots.curve_svg(metrics, "roc"),
        "pr.svg": plots.curve_svg(metrics, "pr"),
        "scores.svg": plots.score_histogram_svg(metrics),
        "coverage.svg": plots.coverage_svg(metrics),
        "history.svg": plots.history_svg(metrics),
        "label_calibration.svg": plots.label_calibration_svg(metrics),
        "drift.svg": drift_plot.drift_svg(metrics),  # a run with drift_reference only
    }
    outputs = metrics.outputs or []
    for i, output in enumerate(outputs):
        made[regression_plot_name("predicted_vs_true", i, len(outputs))] = plots.predicted_vs_true_svg(metrics, output)
        made[regression_plot_name("residuals", i, len(outputs))] = plots.residual_histogram_svg(metrics, output)
        made[regression_plot_name("deciles", i, len(outputs))] = plots.deciles_svg(metrics, output)
    return {name: svg for name, svg in made.items() if svg}


def regression_plot_name(kind: str, index: int, outputs: int) -> str:
    """The file of one output's regression plot: one file per output when the head has several."""
    return f"{kind}.svg" if outputs == 1 else f"{kind}-{index}.svg"
