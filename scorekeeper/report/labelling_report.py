"""The report's labelling part (docs/labelling.md): how many rows to label, where they are and the
exact commands that hand their labels back; once they are back, the prediction-powered values with
their intervals beside the classical ones, the sample's caveats and whether the label-free estimate
is off on this run.

One view (`LabellingView`, built by `labelling_view` from the typed document and the run's facts:
RunFacts, the request's public parameters, the run id, the deployment) rendered by
templates/labelling.md.j2 (report.md and the Prefect summary) and templates/labelling.html.j2, each
escaping data by its output's rule (scorekeeper/report/view.py).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scorekeeper.metrics.document import MetricsDocument
from scorekeeper.params import PARAMETER_EFFECTS, PREDICTIONS, ScoreRequest
from scorekeeper.report.render import fmt
from scorekeeper.report.report_stats import pvalue
from scorekeeper.report.view import Num, at, render_markdown_section
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


@dataclass(frozen=True)
class PPMetric:
    """A prediction-powered metric beside the classical one (the labelled sample alone)."""

    name: str
    value: Num
    ci: Num
    classical: Num
    classical_ci: Num
    lam: str  # the power-tuning lambda as shown: a number, one per output, or "per target"


@dataclass(frozen=True)
class PPView:
    """The prediction-powered part: its rows, the metrics and the notes."""

    rows: Num
    labelled: Num
    plan_rows: Num
    sampling: str
    metrics: tuple[PPMetric, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class PlanView:
    """The labelling plan: how many rows, where, drawn how, and the commands that hand labels back."""

    rows: Num
    where: str  # the plan file's place (report.md: report/label_plan.parquet; the Prefect summary: its URI)
    budget: int
    sampling: str
    expected_rows: float
    reference: str | None  # the run whose calibration gave the label-free predictions
    key: str
    commands: tuple[str, str] | None  # the CLI rerun and the `prefect deployment run` (None: no id_column)
    id_column: str | None
    label_column: str
    labels_file: str


@dataclass(frozen=True)
class LabellingView:
    """The labelling part (templates/labelling.md.j2, labelling.html.j2)."""

    pp: PPView | None
    plan: PlanView | None
    sample_note: str | None


def _lam(lam) -> str:
    return fmt(lam) if isinstance(lam, float) else ("per target" if isinstance(lam, dict) else ", ".join(fmt(x) for x in lam))


def _pp_view(document: MetricsDocument) -> PPView | None:
    pp = document.prediction_powered
    if pp is None:
        return None

    def metric(name: str, lam) -> PPMetric:
        value, ci, classical, classical_ci = (at(document, "prediction_powered", "metrics", name, k) for k in PP_FIELDS)
        return PPMetric(name, value, ci, classical, classical_ci, _lam(lam))

    rows, labelled, plan_rows = (at(document, "prediction_powered", k) for k in ("rows", "labelled", "plan_rows"))
    metrics = tuple(metric(name, m.lam) for name, m in pp.metrics.items())
    return PPView(rows, labelled, plan_rows, pp.sampling, metrics, tuple(pp_notes(document)))


PP_FIELDS = ("value", "ci", "classical", "classical_ci")  # a prediction-powered metric's numbers, in the table's order


def _plan_view(document: MetricsDocument, facts: RunFacts | None, plan_uri: str | None) -> PlanView | None:
    plan = document.label_plan
    if plan is None:
        return None
    return PlanView(
        rows=at(document, "label_plan", "rows"),
        where=plan_uri or "report/label_plan.parquet",
        budget=plan.budget,
        sampling=plan.sampling,
        expected_rows=plan.expected_rows,
        reference=plan.reference,
        key=plan.key,
        commands=labels_back_commands(facts),
        id_column=facts.id_column if facts is not None else None,
        label_column=(facts.label_column if facts is not None else None) or "label",
        labels_file=LABELS_FILE,
    )


def labelling_view(document: MetricsDocument, facts: RunFacts | None, plan_uri: str | None = None) -> LabellingView | None:
    """The labelling part's view (None: a run without a plan or prediction-powered metrics)."""
    view = LabellingView(_pp_view(document), _plan_view(document, facts, plan_uri), sample_note(document))
    return view if view.pp or view.plan or view.sample_note else None


def labelling_markdown(document: MetricsDocument, facts: RunFacts | None, plan_uri: str | None = None) -> list[str]:
    """The whole labelling part of report.md and the Prefect summary."""
    return render_markdown_section("labelling", labelling_view(document, facts, plan_uri))
