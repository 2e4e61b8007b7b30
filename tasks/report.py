"""The human report: report.md and report.html (with inline SVG plots), and metrics.json.

Rendering is pure: metrics in, text out. Publishing writes each file whole.
"""

from __future__ import annotations

import html

from prefect import task

from scorekeeper.run_folder import RunFolder
from scorekeeper.tasks.retries import IO_RETRIES


def _fmt(value, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def headline(metrics: dict) -> list[tuple[str, str]]:
    rows = [("rows", _fmt(metrics["rows"])), ("scored", _fmt(metrics["scored"])), ("evaluated", _fmt(metrics["evaluated"]))]
    if not metrics["scoring_only"]:
        rows += [(k, _fmt(metrics[k])) for k in ("accuracy", "macro_f1", "weighted_f1", "log_loss", "ece")]
        rows += [(k, _fmt(metrics[k])) for k in ("missing_predictions", "unmatched_predictions")]
    return rows


def render_markdown(metrics: dict, run_info: dict) -> str:
    lines = [f"# scorekeeper report: {run_info['run_id']}", ""]
    lines += [f"- input: `{run_info['input_uri']}`", f"- model: `{run_info['model_uri']}`"]
    if run_info.get("adapter_uri"):
        lines.append(f"- adapter: `{run_info['adapter_uri']}`")
    lines += [f"- mode: {run_info['mode']}, processes: {run_info['num_processes']}", ""]
    if metrics["scoring_only"]:
        lines += ["**Scoring-only run**: the input has no ground-truth labels, so no accuracy metrics.", ""]
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
            f"{pipe.get('microbatches')} micro-batches, bubble {_fmt(pipe.get('bubble_measured'), 3)} measured "
            f"vs {_fmt(pipe.get('bubble_theoretical'), 3)} theoretical.",
            "",
        ]
    if metrics["unknown_labels"]:
        lines += ["## Labels the model cannot predict", "", "| label | rows |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in metrics["unknown_labels"].items()] + [""]
    if metrics["per_class"]:
        lines += ["## Per class", "", "| label | precision | recall | f1 | support |", "|---|---|---|---|---|"]
        lines += [
            f"| {name} | {_fmt(c['precision'])} | {_fmt(c['recall'])} | {_fmt(c['f1'])} | {c['support']} |"
            for name, c in metrics["per_class"].items()
        ] + [""]
        names = list(metrics["per_class"])
        lines += ["## Confusion (rows: truth, columns: prediction)", "", "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for t in names:
            lines.append(f"| **{t}** | " + " | ".join(str(metrics["confusion"].get(t, {}).get(p, 0)) for p in names) + " |")
        lines.append("")
    for column, values in metrics.get("slices", {}).items():
        lines += [f"## By {column}", "", "| value | rows | accuracy |", "|---|---|---|"]
        lines += [f"| {v} | {s['rows']} | {_fmt(s['accuracy'])} |" for v, s in values.items()] + [""]
    return "\n".join(lines)


def confusion_svg(metrics: dict, cell: int = 48) -> str:
    names = list(metrics["per_class"])
    if not names:
        return ""
    counts = [[metrics["confusion"].get(t, {}).get(p, 0) for p in names] for t in names]
    peak = max(max(r) for r in counts) or 1
    pad = 110
    size = pad + cell * len(names)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 10}" height="{size + 10}" font-family="sans-serif" font-size="11">']
    for j, p in enumerate(names):
        parts.append(f'<text x="{pad + j * cell + cell / 2}" y="{pad - 8}" text-anchor="middle">{html.escape(p[:12])}</text>')
    for i, t in enumerate(names):
        parts.append(f'<text x="{pad - 6}" y="{pad + i * cell + cell / 2 + 4}" text-anchor="end">{html.escape(t[:14])}</text>')
        for j in range(len(names)):
            shade = int(255 - 200 * counts[i][j] / peak)
            parts.append(
                f'<rect x="{pad + j * cell}" y="{pad + i * cell}" width="{cell}" height="{cell}" '
                f'fill="rgb({shade},{shade},255)" stroke="#fff"/>'
                f'<text x="{pad + j * cell + cell / 2}" y="{pad + i * cell + cell / 2 + 4}" text-anchor="middle">{counts[i][j]}</text>'
            )
    parts.append(f'<text x="{pad}" y="14">truth (rows) vs prediction (columns)</text></svg>')
    return "".join(parts)


def reliability_svg(metrics: dict, size: int = 260) -> str:
    bins = metrics.get("calibration") or []
    if not bins:
        return ""
    pad = 30
    inner = size - 2 * pad
    width = inner / metrics["ece_bins"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" font-family="sans-serif" font-size="11">',
        f'<line x1="{pad}" y1="{pad + inner}" x2="{pad + inner}" y2="{pad}" stroke="#999" stroke-dasharray="4"/>',
        f'<rect x="{pad}" y="{pad}" width="{inner}" height="{inner}" fill="none" stroke="#333"/>',
    ]
    for b in bins:
        h = inner * (b["accuracy"] or 0)
        parts.append(
            f'<rect x="{pad + b["bin"] * width}" y="{pad + inner - h}" width="{width - 1}" height="{h}" fill="#4a7bd0">'
            f"<title>confidence {b['confidence']:.3f}, accuracy {b['accuracy']:.3f}, {b['rows']} rows</title></rect>"
        )
    parts.append(f'<text x="{pad}" y="{size - 8}">confidence 0 to 1; bars: accuracy; ECE {_fmt(metrics["ece"])}</text></svg>')
    return "".join(parts)


def render_html(metrics: dict, run_info: dict) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in headline(metrics))
    per_class = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{_fmt(c['precision'])}</td><td>{_fmt(c['recall'])}</td>"
        f"<td>{_fmt(c['f1'])}</td><td>{c['support']}</td></tr>"
        for n, c in metrics["per_class"].items()
    )
    note = "<p><strong>Scoring-only run</strong>: no ground-truth labels.</p>" if metrics["scoring_only"] else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>scorekeeper: {html.escape(run_info["run_id"])}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}.plots{{display:flex;gap:2em;flex-wrap:wrap}}</style></head>
<body><h1>scorekeeper report: {html.escape(run_info["run_id"])}</h1>
<p>input <code>{html.escape(run_info["input_uri"])}</code><br>model <code>{html.escape(run_info["model_uri"])}</code><br>
mode {html.escape(run_info["mode"])}, processes {run_info["num_processes"]}</p>{note}
<table>{rows}</table>
<h2>Per class</h2><table><tr><th>label</th><th>precision</th><th>recall</th><th>f1</th><th>support</th></tr>{per_class}</table>
<h2>Plots</h2><div class="plots">{confusion_svg(metrics)}{reliability_svg(metrics)}</div>
</body></html>
"""


def publish_report(run: RunFolder, metrics: dict, run_info: dict) -> dict[str, str]:
    """Write metrics.json, report.md, report.html and the plots; returns their URIs."""
    files = {
        "metrics.json": None,
        "report.md": render_markdown(metrics, run_info),
        "report.html": render_html(metrics, run_info),
        "confusion.svg": confusion_svg(metrics),
        "reliability.svg": reliability_svg(metrics),
    }
    written = {}
    for name, text in files.items():
        if name == "metrics.json":
            run.publish_json(metrics, RunFolder.REPORT_DIR, name)
        elif text:
            run.publish_bytes(text.encode(), RunFolder.REPORT_DIR, name)
        else:
            continue
        written[name] = run.child(RunFolder.REPORT_DIR).uri + "/" + name
    return written


@task(name="publish report", **IO_RETRIES)
def report_task(request, context, metrics: dict, throughput: dict) -> dict:
    """Write metrics.json, report.md and report.html, and publish them as Prefect artifacts."""
    from scorekeeper.tasks import artifacts

    run_info = request.public_dict() | {
        "run_id": context.run_id,
        "throughput": throughput,
        "num_processes": throughput.get("processes") or request.num_processes,
    }
    metrics = metrics | {"scoring": throughput}
    files = publish_report(context.run, metrics, run_info)
    artifacts.publish_report_artifacts(context, metrics, throughput, files)
    return files
