"""The human report: report.md, report.html (one self-contained file, inline SVG) and metrics.json.

Rendering is pure: metrics and run facts in, text out. report.html is a Jinja template
(templates/report.html.j2) with autoescaping on, so every text from the data (labels, ids, row
texts) is escaped; plots come from plots.py. Every section is shown only when its field is in the
metrics. Numbers shown carry `data-key` (their JSON path in metrics.json) and `data-value`, so a
check can compare the page with metrics.json. Publishing writes each file whole.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from prefect import task

from scorekeeper.escape import md_code, md_text
from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks import plots
from scorekeeper.tasks.retries import IO_RETRIES

HEADLINE_METRICS = ("accuracy", "macro_f1", "weighted_f1", "log_loss", "ece")
COMPARED_METRICS = ("accuracy", "macro_f1", "weighted_f1", "log_loss", "ece", "roc_auc_macro", "average_precision_macro")
LOWER_IS_BETTER = frozenset({"log_loss", "ece"})
SAMPLE_TEXT = 200  # characters of a row's text shown among the confident errors


def fmt(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _ci(interval, digits: int = 4) -> str:
    return f"[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval else ""


def signed(value, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:+.{digits}f}"


# The headline of the other heads (docs/contracts.md section 9): JSON paths into metrics.json.
HEAD_HEADLINES = {
    "multi_label": (
        ("subset_accuracy",),
        ("micro_f1",),
        ("macro_f1",),
        ("samples_f1",),
        ("hamming_loss",),
        ("log_loss",),
        ("roc_auc", "macro"),
        ("average_precision", "macro"),
        ("lrap",),
    ),
    "regression": (("mae",), ("rmse",), ("r2",), ("spearman",), ("pearson",), ("kendall_tau_b",), ("mape",), ("wmape",)),
}
REGRESSION_TABLE = ("mae", "mse", "rmse", "r2", "explained_variance", "max_error", "median_absolute_error", "mape", "mape_rows", "wmape")
REGRESSION_TABLE += ("pearson", "spearman", "kendall_tau_b", "mean_truth", "mean_prediction")
REGRESSION_PLOTS = ("predicted_vs_true", "residuals", "deciles")


def head_of(metrics: dict) -> str:
    return metrics.get("head") or "single_label"


def head_headline(metrics: dict) -> list[tuple[str, list[str], object]]:
    """(name, JSON path, value) of the headline metrics of a multi-label or regression run."""
    rows = []
    for path in HEAD_HEADLINES.get(head_of(metrics), ()):
        value = metrics.get(path[0])
        if len(path) > 1:
            value = (value or {}).get(path[1])
        rows.append((" ".join(path).replace("_", " "), list(path), value))
    return rows


def regression_plot_name(kind: str, index: int, outputs: int) -> str:
    """The file of one output's regression plot: one file per output when the head has several."""
    return f"{kind}.svg" if outputs == 1 else f"{kind}-{index}.svg"


def metric_value(metrics: dict, name: str):
    """A headline metric by name; the macro ROC-AUC and AP live one level down."""
    if name in ("roc_auc_macro", "average_precision_macro"):
        return (metrics.get(name.removesuffix("_macro")) or {}).get("macro")
    return metrics.get(name)


def headline(metrics: dict) -> list[tuple[str, str]]:
    rows = [("rows", fmt(metrics["rows"])), ("scored", fmt(metrics["scored"])), ("evaluated", fmt(metrics["evaluated"]))]
    if head_of(metrics) != "single_label":
        if not metrics.get("scoring_only"):
            rows += [(name, fmt(value)) for name, _, value in head_headline(metrics)]
        return rows + [(k, fmt(metrics.get(k))) for k in ("missing_predictions", "unmatched_predictions")]
    if not metrics["scoring_only"]:
        for k in HEADLINE_METRICS:
            text = fmt(metrics[k])
            if k == "accuracy" and metrics.get("accuracy_ci"):
                text += f" (95% CI {_ci(metrics['accuracy_ci'])})"
            rows.append((k, text))
        for k in ("roc_auc_macro", "average_precision_macro"):
            if metric_value(metrics, k) is not None:
                rows.append((k, fmt(metric_value(metrics, k))))
        rows += [(f"top-{k} accuracy", fmt(v)) for k, v in (metrics.get("top_k_accuracy") or {}).items()]
        rows += [(k, fmt(metrics[k])) for k in ("missing_predictions", "unmatched_predictions")]
    return rows


def sorted_slices(values: dict) -> list[tuple[str, dict]]:
    """A slice column's groups, worst accuracy first (then most rows); groups without accuracy last."""
    return sorted(values.items(), key=lambda kv: (kv[1].get("accuracy") is None, kv[1].get("accuracy") or 0.0, -kv[1].get("rows", 0)))


def _md(text) -> str:
    """A value from the data in markdown (a table cell too): escaped, never rendered (scorekeeper/escape.py)."""
    return md_text(text)


def render_markdown(metrics: dict, run_info: dict) -> str:
    lines = [f"# scorekeeper report: {_md(run_info['run_id'])}", ""]
    lines += [f"- input: {md_code(run_info['input_uri'])}", f"- model: {md_code(run_info['model_uri'])}"]
    if run_info.get("adapter_uri"):
        lines.append(f"- adapter: {md_code(run_info['adapter_uri'])}")
    lines += [f"- mode: {run_info['mode']}, processes: {run_info['num_processes']}", ""]
    if metrics["scoring_only"]:
        lines += ["**Scoring-only run**: the input has no ground-truth labels, so no accuracy metrics.", ""]
    gates = metrics.get("gates")
    if gates:
        failed = [g for g in gates if not g["passed"]]
        lines += [f"**Gates: {len(failed)} of {len(gates)} failed.**" if failed else f"**Gates: all {len(gates)} passed.**", ""]
        lines += ["| gate | value | limit | result |", "|---|---|---|---|"]
        lines += [f"| {g['gate']} | {fmt(g['value'])} | {fmt(g['limit'])} | {'pass' if g['passed'] else '**FAIL**'} |" for g in gates]
        lines.append("")
    lines += ["| metric | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in headline(metrics)] + [""]
    throughput = run_info.get("throughput")
    if throughput:
        lines += [
            f"Scored {throughput['rows_scored']} rows this attempt in {throughput['seconds']:.1f} s "
            f"({throughput['rows_per_s']:.1f} rows/s, {throughput['tokens_per_s']:.0f} tokens/s); "
            f"{throughput['truncated']} texts truncated to the model's maximum length.",
            "",
        ]
    for pipe in (throughput or {}).get("pipeline", []):
        lines += [
            f"Pipeline {pipe.get('pipeline', 0)}: stages (layer ranges) {pipe.get('stages')}, "
            f"{pipe.get('microbatches')} micro-batches, bubble {fmt(pipe.get('bubble_measured'), 3)} measured "
            f"vs {fmt(pipe.get('bubble_theoretical'), 3)} theoretical.",
            "",
        ]
    lines += groups_markdown(throughput)
    lines += _markdown_comparison(metrics.get("comparison"))
    lines += _markdown_multilabel(metrics) + _markdown_regression(metrics)
    if metrics.get("unknown_labels"):
        lines += ["## Labels the model cannot predict", "", "| label | rows |", "|---|---|"]
        lines += [f"| {_md(k)} | {v} |" for k, v in metrics["unknown_labels"].items()] + [""]
    if metrics.get("per_class"):
        lines += ["## Per class", "", "| label | precision | recall | f1 | support |", "|---|---|---|---|---|"]
        lines += [
            f"| {_md(name)} | {fmt(c['precision'])} | {fmt(c['recall'])} | {fmt(c['f1'])} | {c['support']} |"
            for name, c in metrics["per_class"].items()
        ] + [""]
        names, counts, grouped = plots.confusion_cells(metrics)
        lines += ["## Confusion (rows: truth, columns: prediction)", ""]
        if grouped:
            lines += [f"The {len(names) - 1} labels with the most rows; the other {grouped} are summed as the last row and column.", ""]
        lines += ["| | " + " | ".join(_md(n) for n in names) + " |", "|---" * (len(names) + 1) + "|"]
        lines += [f"| **{_md(t)}** | " + " | ".join(str(n) for n in counts[i]) + " |" for i, t in enumerate(names)] + [""]
    for column, values in (metrics.get("slices") or {}).items():
        lines += [f"## By {_md(column)} (worst first)", "", "| value | rows | accuracy | 95% CI |", "|---|---|---|---|"]
        lines += [f"| {_md(v)} | {s['rows']} | {fmt(s['accuracy'])} | {_ci(s.get('accuracy_ci'))} |" for v, s in sorted_slices(values)]
        lines.append("")
    return "\n".join(lines)


PER_LABEL_HEADER = ("label", "precision", "recall", "f1", "support", "prevalence", "threshold", "tuned threshold")
PER_LABEL_HEADER += ("tuned F1 (tuning half)", "tuned F1 (held out)", "F1 at threshold (held out)", "ROC-AUC", "avg precision")


def per_label_rows(metrics: dict) -> list[tuple[str, list[tuple[list, object, int]]]]:
    """Multi-label: per label, its cells as (JSON path, value, digits), in PER_LABEL_HEADER's order."""
    rows = []
    for label, c in (metrics.get("per_label") or {}).items():
        cells = [(["per_label", label, k], c.get(k), 4) for k in ("precision", "recall", "f1", "support", "prevalence", "threshold")]
        cells += [(["per_label", label, k], c.get(k), 4) for k in ("tuned_threshold", "tuned_f1_in_sample", "tuned_f1_heldout")]
        cells.append((["per_label", label, "heldout_f1_at_threshold"], c.get("heldout_f1_at_threshold"), 4))
        for area in ("roc_auc", "average_precision"):
            cells.append(([area, "per_label", label], ((metrics.get(area) or {}).get("per_label") or {}).get(label), 4))
        rows.append((label, cells))
    return rows


def _markdown_multilabel(metrics: dict) -> list[str]:
    if head_of(metrics) != "multi_label" or not metrics.get("per_label"):
        return []
    lines = ["## Per label", ""]
    tuning = metrics.get("threshold_tuning") or {}
    if tuning:
        lines += [
            f"Tuned thresholds are F1-optimal on one half of the rows ({_md(tuning['split'])}: {tuning['tuning_rows']} rows) "
            f"and measured on the other ({tuning['heldout_rows']} rows); the gap between the two F1s is the optimism of tuning in-sample.",
            "",
        ]
    lines += ["| " + " | ".join(PER_LABEL_HEADER) + " |", "|---" * len(PER_LABEL_HEADER) + "|"]
    lines += ["| " + _md(label) + " | " + " | ".join(fmt(v) for _, v, _ in cells) + " |" for label, cells in per_label_rows(metrics)]
    card = metrics.get("label_cardinality") or {}
    if card:
        lines += [
            "",
            f"Labels per row: {fmt(card.get('truth'))} in the truth, {fmt(card.get('predicted'))} predicted; "
            f"{card.get('rows_without_prediction')} rows with no label predicted.",
        ]
    errors = metrics.get("confident_wrong_labels") or []
    if errors:
        lines += ["", "## Most confident wrong labels", "", "| row | id | label | truth | probability |", "|---|---|---|---|---|"]
        lines += [f"| {e['row_index']} | {_md(e['id'])} | {_md(e['label'])} | {e['truth']} | {fmt(e['probability'])} |" for e in errors]
    return lines + [""]


def _markdown_regression(metrics: dict) -> list[str]:
    if head_of(metrics) != "regression" or not metrics.get("per_output"):
        return []
    outputs = metrics["per_output"]
    lines = ["## Per output" if len(outputs) > 1 else "## Regression metrics", ""]
    lines += ["| metric | " + " | ".join(_md(o) for o in outputs) + " |", "|---" * (len(outputs) + 1) + "|"]
    lines += [f"| {k} | " + " | ".join(fmt(v.get(k)) for v in outputs.values()) + " |" for k in REGRESSION_TABLE]
    for output in outputs:
        title = f" ({_md(output)})" if len(outputs) > 1 else ""
        deciles = (metrics.get("calibration_deciles") or {}).get(output) or []
        if deciles:
            lines += ["", f"## Calibration by decile{title}", "", "| decile | rows | mean prediction | mean truth |", "|---|---|---|---|"]
            lines += [f"| {d['decile']} | {d['rows']} | {fmt(d['mean_prediction'])} | {fmt(d['mean_truth'])} |" for d in deciles]
        errors = (metrics.get("largest_errors") or {}).get(output) or []
        if errors:
            lines += ["", f"## Largest errors{title}", "", "| row | id | truth | prediction | error | text |", "|---|---|---|---|---|---|"]
            lines += [
                f"| {e['row_index']} | {_md(e['id'])} | {fmt(e['truth'])} | {fmt(e['prediction'])} | {fmt(e['error'])} | {_md(e.get('text') or '')} |"
                for e in errors
            ]
    return lines + [""]


GROUP_HEADER = ("group", "worker (machine)", "ranges", "rows", "rows/s", "attempts")


def group_rows(throughput: dict | None) -> list[tuple[str, ...]]:
    """One row per group of a fanned-out run (fan_out > 1): which machine scored which ranges, how
    fast; none for a run scored on one machine."""
    from scorekeeper.tasks.fan_out import spans

    rows = []
    for g in (throughput or {}).get("groups") or []:
        where = (g.get("worker") or "?") + (f" ({g['machine']})" if g.get("machine") else "")
        rows.append((str(g["group"]), where, spans(g["ranges"]), str(g["rows"]), fmt(g.get("rows_per_s"), 1), str(g["attempts"])))
    return rows


def groups_markdown(throughput: dict | None) -> list[str]:
    """The fan-out table of report.md (report.html shows the same rows in its `groups` section)."""
    rows = group_rows(throughput)
    if not rows:
        return []
    lines = ["## Scoring groups", "", "| " + " | ".join(GROUP_HEADER) + " |", "|---" * len(GROUP_HEADER) + "|"]
    return lines + ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows] + [""]


def _markdown_comparison(comparison: dict | None) -> list[str]:
    if not comparison:
        return []
    flipped = comparison["flipped"]
    lines = [f"## Compared with run {md_code(comparison['run'])}", ""]
    lines += [
        f"{comparison['rows_compared']} rows compared"
        + (f" (matched on {comparison['matched_on']})" if comparison.get("matched_on") else "")
        + f": {flipped['right_to_wrong']} right -> wrong, {flipped['wrong_to_right']} wrong -> right, "
        f"{flipped['other']} wrong in both with another prediction; McNemar exact p = {comparison['mcnemar_p']:.4g}.",
        "",
    ]
    if comparison.get("accuracy_delta_ci"):
        paired = comparison.get("accuracy_delta_paired")
        change = f" {paired:+.4f} over the rows both runs scored," if isinstance(paired, float) else ""
        lines += [f"Accuracy change,{change} paired bootstrap 95% interval: {_ci(comparison['accuracy_delta_ci'])}.", ""]
    lines += ["| metric | change (this - other) |", "|---|---|"]
    lines += [f"| {k} | {signed(v)} |" for k, v in comparison["deltas"].items()] + [""]
    return lines


def plot_files(metrics: dict) -> dict[str, str]:
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
    }
    outputs = metrics.get("outputs") or []
    for i, output in enumerate(outputs):
        made[regression_plot_name("predicted_vs_true", i, len(outputs))] = plots.predicted_vs_true_svg(metrics, output)
        made[regression_plot_name("residuals", i, len(outputs))] = plots.residual_histogram_svg(metrics, output)
        made[regression_plot_name("deciles", i, len(outputs))] = plots.deciles_svg(metrics, output)
    return {name: svg for name, svg in made.items() if svg}


def _environment():
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["signed"] = signed
    env.filters["ci"] = _ci
    env.filters["key"] = lambda path: json.dumps(list(path), ensure_ascii=False)
    env.filters["raw"] = lambda value: "" if value is None else repr(value)
    return env


def render_html(metrics: dict, run_info: dict) -> str:
    from markupsafe import Markup

    svgs = {name.removesuffix(".svg"): Markup(svg) for name, svg in plot_files(metrics).items()}
    names, _, grouped = plots.confusion_cells(metrics)
    gates = metrics.get("gates") or []
    facts = run_facts(metrics, run_info)
    accuracy = metrics.get("accuracy")
    slices = {
        column: [(v, s, Markup(plots.interval_svg(s.get("accuracy"), s.get("accuracy_ci"), accuracy))) for v, s in sorted_slices(values)]
        for column, values in (metrics.get("slices") or {}).items()
    }
    slice_intervals = any(s.get("accuracy_ci") for values in (metrics.get("slices") or {}).values() for s in values.values())
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            m=metrics,
            run=run_info,
            svg=svgs,
            facts=facts,
            headline_cards=_cards(metrics),
            gates=gates,
            failed_gates=[g for g in gates if not g["passed"]],
            slices=slices,
            slice_intervals=slice_intervals,
            confusion_grouped=grouped,
            confusion_shown=len(names) - (1 if grouped else 0),
            compared=[(k, metric_value(metrics, k), v) for k, v in ((metrics.get("comparison") or {}).get("deltas") or {}).items()],
            lower_is_better=LOWER_IS_BETTER,
            group_header=GROUP_HEADER,
            groups=group_rows(run_info.get("throughput") or metrics.get("scoring")),
            max_curves=plots.MAX_CURVES,
            per_label_header=PER_LABEL_HEADER,
            per_label=per_label_rows(metrics),
            regression_table=REGRESSION_TABLE,
            regression_plots=_regression_svgs(metrics, svgs),
        )
    )


def _regression_svgs(metrics: dict, svgs: dict) -> dict[str, list]:
    """Per regression output, its plots in REGRESSION_PLOTS' order."""
    outputs = metrics.get("outputs") or []
    return {
        output: [
            svgs[stem] for kind in REGRESSION_PLOTS if (stem := regression_plot_name(kind, i, len(outputs)).removesuffix(".svg")) in svgs
        ]
        for i, output in enumerate(outputs)
    }


def _cards(metrics: dict) -> list[dict]:
    """The headline numbers: name, value, JSON path, and an interval where there is one."""
    if metrics.get("scoring_only"):
        return []
    if head_of(metrics) != "single_label":
        return [{"name": name, "value": value, "key": path} for name, path, value in head_headline(metrics)]
    cards = [{"name": "accuracy", "value": metrics["accuracy"], "key": ["accuracy"], "ci": metrics.get("accuracy_ci")}]
    cards += [{"name": k.replace("_", " "), "value": metrics[k], "key": [k]} for k in HEADLINE_METRICS[1:]]
    if (metrics.get("roc_auc") or {}).get("macro") is not None:
        cards.append({"name": "ROC-AUC (macro)", "value": metrics["roc_auc"]["macro"], "key": ["roc_auc", "macro"]})
    if (metrics.get("average_precision") or {}).get("macro") is not None:
        cards.append(
            {"name": "average precision (macro)", "value": metrics["average_precision"]["macro"], "key": ["average_precision", "macro"]}
        )
    for k, v in (metrics.get("top_k_accuracy") or {}).items():
        cards.append({"name": f"top-{k} accuracy", "value": v, "key": ["top_k_accuracy", k]})
    return cards


def run_facts(metrics: dict, run_info: dict) -> list[tuple[str, str]]:
    """What ran, on what, and how fast: (name, text) pairs for the report's last section."""
    scoring = metrics.get("scoring") or run_info.get("throughput") or {}
    facts = [("run", run_info["run_id"]), ("input", run_info["input_uri"])]
    if run_info.get("input_fingerprint"):
        facts.append(("input fingerprint", run_info["input_fingerprint"]))
    facts.append(("model", run_info["model_uri"]))
    if run_info.get("model_fingerprint"):
        facts.append(("model fingerprint", run_info["model_fingerprint"]))
    if run_info.get("adapter_uri"):
        merged = "merged into the weights" if run_info.get("merge_adapter", True) else "not merged"
        facts.append(("adapter", f"{run_info['adapter_uri']} ({merged})"))
        if run_info.get("adapter_fingerprint"):
            facts.append(("adapter fingerprint", run_info["adapter_fingerprint"]))
    facts.append(("rows", f"{metrics['rows']:,} in the input, {metrics['scored']:,} scored, {metrics['evaluated']:,} evaluated"))
    if metrics.get("ground_truth_source"):
        facts.append(("ground truth", metrics["ground_truth_source"]))
    facts.append(
        (
            "mode",
            f"{run_info['mode']}, {run_info['num_processes']} process(es)"
            + (f", dtype {dtype}" if (dtype := scoring.get("dtype") or _groups_dtype(scoring) or run_info.get("dtype")) else ""),
        )
    )
    if scoring.get("rows_scored") is not None:
        facts.append(
            (
                "scoring",
                f"{scoring['rows_scored']:,} rows this attempt in {scoring['seconds']:.1f} s: "
                f"{scoring['rows_per_s']:,.1f} rows/s, {scoring['tokens_per_s']:,.0f} tokens/s",
            )
        )
        if scoring.get("rows_scored") != metrics["scored"]:
            facts.append(("resumed", f"{metrics['scored'] - scoring['rows_scored']:,} rows were scored by an earlier attempt"))
        if scoring.get("padded_tokens"):
            facts.append(
                (
                    "padding",
                    f"{scoring['tokens']:,} tokens of {scoring['padded_tokens']:,} padded ({scoring['tokens'] / scoring['padded_tokens']:.1%} useful)",
                )
            )
        facts.append(("truncated", f"{scoring.get('truncated', 0):,} texts cut to the model's maximum length"))
    for pipe in scoring.get("pipeline", []):
        facts.append(
            (
                f"pipeline {pipe.get('pipeline', 0)}",
                f"stages {pipe.get('stages')}, {pipe.get('microbatches')} micro-batches, bubble "
                f"{fmt(pipe.get('bubble_measured'), 3)} measured vs {fmt(pipe.get('bubble_theoretical'), 3)} theoretical",
            )
        )
    for step, seconds in (run_info.get("durations") or {}).items():
        facts.append((f"{step} time", f"{seconds:.1f} s"))
    if metrics.get("null_text_rows"):
        facts.append(("null texts", f"{metrics['null_text_rows']:,} rows scored as empty text"))
    if run_info.get("slice_columns"):
        facts.append(("slice columns", ", ".join(run_info["slice_columns"])))
    return facts


def _groups_dtype(scoring: dict) -> str | None:
    """A fanned-out run's dtype: the one its groups' machines used (each reports its own)."""
    used = {g.get("dtype") for g in scoring.get("groups") or [] if g.get("dtype")}
    return ", ".join(sorted(used)) or None


def publish_report(run: RunFolder, metrics: dict, run_info: dict) -> dict[str, str]:
    """Write the plots, report.md, report.html and metrics.json (last), then the completion record
    (tasks/publish.py); returns their URIs."""
    from datetime import UTC, datetime

    from scorekeeper.tasks.publish import metrics_bytes, publish_complete

    files = {name: svg.encode() for name, svg in plot_files(metrics).items()}
    files |= {"report.md": render_markdown(metrics, run_info).encode(), "report.html": render_html(metrics, run_info).encode()}
    files["metrics.json"] = metrics_bytes(metrics)
    finished = metrics.get("finished_at") or datetime.now(UTC).isoformat(timespec="seconds")
    return publish_complete(run, files, finished)


@task(name="publish report", **IO_RETRIES)
def report_task(request, context, metrics: dict, throughput: dict) -> dict:
    """Write metrics.json, report.md and report.html, and publish them as Prefect artifacts."""
    from scorekeeper.tasks import artifacts

    plan = context.run.read_plan() if context.run.exists(RunFolder.PLAN) else None
    run_info = request.public_dict() | {
        "run_id": context.run_id,
        "throughput": throughput,
        "num_processes": throughput.get("processes") or request.num_processes,
        "model_fingerprint": context.model_fingerprint,
        "adapter_fingerprint": context.adapter_fingerprint,
        "input_fingerprint": plan.input_fingerprint if plan else None,
    }
    metrics = metrics | {"scoring": throughput}
    files = publish_report(context.run, metrics, run_info)
    artifacts.publish_report_artifacts(context, metrics, throughput, files)
    return files
