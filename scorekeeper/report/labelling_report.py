"""The report's labelling part (docs/labelling.md): how many rows to label, where they are and the
exact commands that hand their labels back; once they are back, the prediction-powered values with
their intervals beside the classical ones, the sample's caveats and whether the label-free estimate
is off on this run.

Pure functions of the typed document and the run's facts (RunFacts: the request's public parameters, the
run id, the deployment), used by report.md, report.html and the Prefect summary alike. They return
plain text lines in markdown; each caller escapes data by its own rule (md_text / md_code here).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from scorekeeper.escape import md_code, md_text
from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.params import PARAMETER_EFFECTS, PREDICTIONS, ScoreRequest
from scorekeeper.report.render import fmt
from scorekeeper.report.report_stats import pvalue
from scorekeeper.run_facts import RunFacts

LABELS_FILE = "labels.csv"  # the placeholder for the user's labelled copy of the plan
SIGNIFICANT = 0.05


def _cli_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _kept_parameters(parameters: Mapping[str, Any]) -> dict:
    """The parameters a rerun must repeat to resume the run: those that change predictions, where
    not at their defaults (the URIs as request.json shows them)."""
    defaults = {name: f.get_default(call_default_factory=True) for name, f in ScoreRequest.model_fields.items() if not f.is_required()}
    kept = {}
    for name, effects in PARAMETER_EFFECTS.items():
        if name == "run_name" or name not in parameters:
            continue
        value = parameters[name]
        required = ScoreRequest.model_fields[name].is_required()
        if (PREDICTIONS in effects or name == "drift_reference") and (required or value != defaults.get(name)) and value is not None:
            kept[name] = value
    return kept


def labels_back_commands(facts: RunFacts | None, labels: str = LABELS_FILE) -> tuple[str, str] | None:
    """The CLI command and the `prefect deployment run` command that rerun this run with the labels
    in `labels` as ground truth (None when the run has no id_column to join them on, or its facts
    are not known)."""
    id_column = facts.id_column if facts is not None else None
    if facts is None or not id_column:
        return None
    label_column = facts.label_column or "label"
    wanted = _kept_parameters(facts.parameters) | {
        "run_name": facts.run_id,
        "label_column": label_column,
        "ground_truth_uri": labels,
        "label_budget": facts.label_budget,
        "label_sampling": facts.label_sampling,
    }
    cli = "scorekeeper run " + " ".join(f"--{name.replace('_', '-')} {shlex.quote(_cli_value(v))}" for name, v in wanted.items())
    deployment = facts.deployment
    if deployment:  # the deployment holds the rest of the parameters; as_of fills its dated templates as this run's were
        params = {"run_name": facts.run_id, "ground_truth_uri": labels, "label_column": label_column}
        if facts.as_of:
            params["as_of"] = facts.as_of
    else:
        deployment, params = "scorekeeper/adhoc", wanted
    prefect = f"prefect deployment run {shlex.quote(deployment)} " + " ".join(
        f"--param {shlex.quote(f'{name}={_cli_value(v)}')}" for name, v in params.items()
    )
    return cli, prefect


def plan_lines(document: MetricsDocument, facts: RunFacts | None, plan_uri: str | None = None) -> list[str]:
    """report.md's labelling plan part: how many rows to label, where, and how to hand them back."""
    plan = document.label_plan
    if plan is None:
        return []
    where = plan_uri or "report/label_plan.parquet"
    source = f"the calibration of run {md_text(plan.reference)}" if plan.reference else "the model's own outputs"
    lines = [
        "## Labelling plan",
        "",
        f"**Label the {plan.rows} rows of {md_code(where)}** (budget {plan.budget}, {plan.sampling} sampling, "
        f"{plan.expected_rows:.1f} rows expected; label-free predictions from {source}). The plan is drawn from the run id "
        f"{md_code(plan.key)}: a rerun of this run draws the same rows.",
        "",
    ]
    commands = labels_back_commands(facts)
    if facts is None or commands is None:
        lines += [
            "This run has no `id_column`, so labels cannot be joined back to it: give the nightly run an id_column.",
            "",
        ]
        return lines
    id_column, label_column = facts.id_column, facts.label_column or "label"
    rename = "" if id_column == "id" else f" (its `id` column renamed {md_code(str(id_column))})"
    lines += [
        f"Hand the labels back as ground truth: save the plan's rows{rename} with a {md_code(label_column)} column of their "
        f"labels as {md_code(LABELS_FILE)} (CSV, Parquet or JSON Lines), and rerun this run under its name (nothing is scored "
        "again; the labels are joined on the id):",
        "",
        "```",
        commands[0],
        "```",
        "",
        "or, from a Prefect deployment:",
        "",
        "```",
        commands[1],
        "```",
        "",
    ]
    return lines


def pp_lines(document: MetricsDocument) -> list[str]:
    """report.md's prediction-powered part: the values with intervals beside the classical ones, and
    what to make of them."""
    pp = document.prediction_powered
    if pp is None:
        return []
    lines = [
        "## Prediction-powered metrics",
        "",
        f"Over the run's {pp.rows} scored rows, from {pp.labelled} labelled rows of the {pp.plan_rows}-row plan "
        f"({pp.sampling} sampling) and the label-free predictions on every row; valid under any shift.",
        "",
        "| metric | prediction-powered | 95% CI | classical (sample alone) | 95% CI | lambda |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in pp.metrics.items():
        lam = m.lam
        shown = fmt(lam) if isinstance(lam, float) else ("per target" if isinstance(lam, dict) else ", ".join(fmt(x) for x in lam))
        lines.append(f"| {md_text(name)} | {fmt(m.value)} | {_ci(m.ci)} | {fmt(m.classical)} | {_ci(m.classical_ci)} | {shown} |")
    lines.append("")
    lines += [f"- {md_text(note)}" for note in pp_notes(document)]
    lines.append("")
    return lines


def _ci(ci: list[float] | None) -> str:
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "n/a"


def pp_notes(document: MetricsDocument) -> list[str]:
    """The sentences the prediction-powered part carries (plain text)."""
    pp = document.prediction_powered
    if pp is None:
        return []
    notes = []
    bias = pp.estimate_bias
    if bias is not None and bias.p is not None and bias.value is not None:
        if bias.p < SIGNIFICANT:
            notes.append(
                f"The label-free estimate is off on this run: {bias.metric} {fmt(bias.label_free)} label-free is "
                f"{fmt(bias.value)} [{fmt(bias.ci[0] if bias.ci else None)}, {fmt(bias.ci[1] if bias.ci else None)}] away from "
                f"the labels' (p {pvalue(bias.p)}): the reference's calibration does not hold (a concept shift, or labels unlike the reference's)."
            )
        else:
            notes.append(f"The label-free {bias.metric} ({fmt(bias.label_free)}) agrees with the labels (p {pvalue(bias.p)}).")
        if bias.metric != "accuracy":  # v_lf = 0: micro_f1 and mae
            notes.append(
                "The estimate_bias test assumes a reference much larger than the plan (the label-free estimate's own noise is left out)."
            )
    if pp.small_sample:
        notes.append(
            "Small sample (under 300 labelled rows, or under 30 of either outcome): the intervals may be too narrow "
            "(coverage measured 0.87-0.94 there, 0.93-0.97 above)."
        )
    if pp.unlabelled_plan_rows:
        notes.append(
            f"{pp.unlabelled_plan_rows} plan rows have no label (response rate {pp.response_rate:.3f}): they are taken to be "
            "missing at random within the plan."
        )
    if pp.labelled_outside_plan:
        notes.append(f"{pp.labelled_outside_plan} labelled rows outside the plan take no part in these estimates.")
    return notes


def sample_note(document: MetricsDocument) -> str | None:
    """The caveat on the ordinary metrics of a run with a plan: they are over the labelled rows."""
    if document.label_plan is None or not document.evaluated:
        return None
    if document.label_plan.sampling == "active":
        return (
            f"The metrics below are over the {document.evaluated} labelled rows, a sample chosen by uncertainty "
            "(not the run's rows): the run's metrics are the prediction-powered ones."
        )
    return f"The metrics below are over the {document.evaluated} labelled rows, not the run's rows: the run's metrics are the prediction-powered ones."


def labelling_markdown(document: MetricsDocument, facts: RunFacts | None, plan_uri: str | None = None) -> list[str]:
    """The whole labelling part of report.md and the Prefect summary."""
    lines = pp_lines(document)
    lines += plan_lines(document, facts, plan_uri)
    note = sample_note(document)
    if note:
        lines += [f"**{md_text(note)}**", ""]
    return lines
