"""Quality gates: conditions on metrics.json that fail the run (after its outputs are published).

A gate is `{metric: "OP NUMBER"}` with OP one of >=, >, <=, <, e.g. `{"accuracy": ">=0.9"}`.
Metrics: the run's own metrics of the metric registry (scorekeeper/metrics/registry.py) and, with
`compare_to`, the comparison's: `<metric>_drop` = other run - this run, `<metric>_delta` = this run
- other run (for the metrics `comparison.deltas` holds), and the comparison's statistics
(`mcnemar_p`, `right_to_wrong`, `wrong_to_right`); with `drift_reference`, `drifted_signals` and the
estimates (`estimated_accuracy`, `estimated_macro_f1`, `estimated_micro_f1`, `estimated_mae`); with
`label_budget`, the labelled plan's prediction-powered estimates (`pp_accuracy`, `pp_macro_f1`,
`pp_micro_f1`, `pp_subset_accuracy`, `pp_mae`) and `estimate_bias` (its absolute value: how far the
label-free estimate is off on this run, docs/labelling.md). Every comparison gate carries its metric's
paired test (comparison.metric_tests; accuracy's for the statistics): `method`, `p`, `ci` (of the
gate's value: a drop's interval is the delta's, negated) and the `detectable_change` at this row
count. A comparison gate may end in `if significant` (or `when significant`): it then fails only
when that metric's own test says the runs differ (p < SIGNIFICANCE); a test without a p-value
cannot say so, and the gate is then judged on its value alone. A gate whose metric has no value
(a scoring-only run, an undefined ROC-AUC, a metric the run's head kind does not have) fails: what
cannot be checked does not pass.

Pure functions, no Prefect: the parameter model validates gates with them before anything runs.
"""

from __future__ import annotations

import difflib
import json
import math
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scorekeeper.errors import GATES_FAILED
from scorekeeper.evaluation.statistics.paired_tests import ALPHA, detectable_change
from scorekeeper.head_kind import DEFAULT_HEAD
from scorekeeper.metrics.document import GateResult
from scorekeeper.metrics.registry import (
    HeadKind,
    Metric,
    Path,
    Scope,
    compared_metrics,
    head_of,
    metrics_of,
    number_at,
    run_metrics,
    value_at,
)

SIGNIFICANCE = ALPHA


@dataclass(frozen=True)
class GateMetric:
    """A name a gate may use: a metric of the registry, or the change of one (`_drop`, `_delta`)."""

    name: str
    path: Path
    metric: Metric
    drop: bool = False  # other - this: the delta negated

    @property
    def comparison(self) -> bool:
        return self.metric.scope == Scope.COMPARISON or self.path[0] == "comparison"


def gate_metrics(head: HeadKind | None = DEFAULT_HEAD) -> dict[str, GateMetric]:
    """Every name a gate of a `head` run may use (None: of any head), in the registry's order."""
    names = {m.name: GateMetric(m.name, m.path, m) for m in run_metrics(head)}
    for m in compared_metrics(head):
        names[f"{m.name}_drop"] = GateMetric(f"{m.name}_drop", ("comparison", "deltas", m.name), m, drop=True)
    for m in compared_metrics(head):
        names[f"{m.name}_delta"] = GateMetric(f"{m.name}_delta", ("comparison", "deltas", m.name), m)
    names |= {m.name: GateMetric(m.name, m.path, m) for m in metrics_of(head, Scope.COMPARISON)}
    return names


# Every head's names: a gate is parsed before the model (and so the head kind) is known.
GATE_METRICS = gate_metrics(None)
# The names that need compare_to (the parameter model refuses them without it).
COMPARISON_METRICS = frozenset(name for name, g in GATE_METRICS.items() if g.comparison)
# The names that need drift_reference (drift_signals, the estimates: docs/drift.md).
MONITORING_METRICS = frozenset(name for name, g in GATE_METRICS.items() if g.metric.monitoring)
# The names that need label_budget (the prediction-powered estimates, estimate_bias: docs/labelling.md).
LABELLING_METRICS = frozenset(name for name, g in GATE_METRICS.items() if g.metric.labelling)
OPERATORS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def _rounded(value: float) -> float:
    """A metric as compared with its limit: to 12 significant digits, so that a difference of two
    metrics that equals the limit on paper (0.90 - 0.89 against 0.01) is not a hair above it."""
    return float(f"{value:.12g}")


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_SPEC = re.compile(rf"^\s*(>=|<=|>|<)\s*({_NUMBER})\s*(?:(?:if|when)\s+significant)?\s*$", re.IGNORECASE)
_SIGNIFICANT = re.compile(r"(?:if|when)\s+significant\s*$", re.IGNORECASE)
_OPTION = re.compile(r"^\s*([A-Za-z0-9_]+)\s*((?:>=|<=|>|<).*)$", re.DOTALL)


@dataclass(frozen=True)
class Gate:
    metric: str
    op: str
    limit: float
    if_significant: bool

    @property
    def comparison(self) -> bool:
        return GATE_METRICS[self.metric].comparison

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}" + (" if significant" if self.if_significant else "")


def parse_gate(metric: str, spec: str, head: HeadKind | None = DEFAULT_HEAD) -> Gate:
    """One gate from its metric name and its condition; ValueError with a message naming both.
    `head`: the run's head kind, whose metrics the gate may name (None, while it is not known yet:
    any head's). The parameter model parses with the `head` parameter (None for `auto`); the run,
    once the model's head is resolved, with that head (heads.check_head_options, evaluate_gates)."""
    names = gate_metrics(head)
    if metric not in names:
        raise ValueError(f"gate {metric!r}: unknown metric{_did_you_mean(metric, names)}; gates read {_known(head)}")
    if not isinstance(spec, str):
        raise ValueError(f"gate {metric!r}: the condition must be text such as '>=0.9', not {spec!r}")
    match = _SPEC.match(spec)
    if not match:
        raise ValueError(f"gate {metric!r}: {spec!r} is not OP NUMBER with OP one of >=, >, <=, < (e.g. '>=0.9'; '<=0.01 if significant')")
    significant = bool(_SIGNIFICANT.search(spec))
    if significant and not names[metric].comparison:
        raise ValueError(f"gate {metric!r}: 'if significant' applies to comparison gates only (<metric>_drop, <metric>_delta, ...)")
    limit = float(match.group(2))
    if not math.isfinite(limit):  # 1e999 is inf: metrics.json is strict JSON, and such a gate means nothing
        raise ValueError(f"gate {metric!r}: the limit in {spec!r} is not a finite number")
    return Gate(metric, match.group(1), limit, significant)


def _did_you_mean(metric: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(metric, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _known(head: HeadKind | None) -> str:
    """The gate names of a head kind (of each, when it is not known): its own metrics, then what
    compare_to adds."""
    heads = list(HeadKind) if head is None else [HeadKind(head)]
    parts = []
    for kind in heads:
        own = ", ".join(m.name for m in run_metrics(kind))
        compared = ", ".join(m.name for m in compared_metrics(kind))
        statistics = ", ".join(m.name for m in metrics_of(kind, Scope.COMPARISON))
        parts.append(
            ("" if head else f"in {kind.value} runs ")
            + f"{own}, and with compare_to <metric>_drop / <metric>_delta (for {compared})"
            + (f", {statistics}" if statistics else "")
        )
    return "; ".join(parts)


def parse_gates(gates: dict[str, str], head: HeadKind | None = DEFAULT_HEAD) -> list[Gate]:
    return [parse_gate(metric, spec, head) for metric, spec in gates.items()]


def head_gates(gates: Mapping[str, str], head: HeadKind) -> list[Gate]:
    """The gates parsed against the run's head kind, the one check of every place that knows the
    head (opening the run, evaluating the gates): a gate naming a metric this head lacks is an
    InputError naming the metric and the head's metrics, never a traceback."""
    from scorekeeper.errors import InputError

    try:
        return parse_gates(dict(gates), head)
    except ValueError as exc:
        raise InputError(f"{exc} (this model's head is {HeadKind(head).value})") from None


def gates_from_options(items: list[str]) -> dict[str, str]:
    """The CLI's repeated `--gates` values: `accuracy>=0.9`, `'macro_f1_drop <= 0.01 if significant'`,
    or a JSON object `{"accuracy": ">=0.9"}`."""
    gates: dict[str, str] = {}
    for item in items:
        if item.strip().startswith("{"):
            try:
                parsed = json.loads(item)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--gates: {item!r} is not valid JSON ({exc.msg})") from None
            if not isinstance(parsed, dict):
                raise ValueError(f"--gates: {item!r} must be a JSON object of metric -> condition")
            pairs = list(parsed.items())
        else:
            match = _OPTION.match(item)
            if not match:
                raise ValueError(f"--gates: {item!r} is not METRIC OP NUMBER (e.g. 'accuracy>=0.9'; quote it in a shell)")
            pairs = [(match.group(1), match.group(2).strip())]
        for metric, spec in pairs:
            if metric in gates:
                raise ValueError(f"--gates: more than one gate on {metric!r}")
            gates[metric] = spec
    return gates


def gate_value(metrics: Any, metric: str) -> float | None:
    """A gate metric's value in a metrics document (typed, or parsed JSON); None when it has none.
    A `_drop` is other - this, the comparison's delta (this - other) negated."""
    gate = GATE_METRICS[metric]
    value = number_at(metrics, gate.path)
    if value is not None and gate.metric.absolute:  # estimate_bias: how far off, either way
        return abs(value)
    return -value if value is not None and gate.drop else value


def evaluate_gates(gates: dict[str, str], metrics: Any) -> list[GateResult]:
    """metrics.json's `gates`: one verdict per gate, in the order given."""
    results = []
    # Parsed against the run's own head kind (refused when the run opened, heads.check_head_options;
    # an evaluation of a run folder on its own meets the same message)
    for gate in head_gates(gates, head_of(metrics)):
        value = gate_value(metrics, gate.metric)
        passed = value is not None and OPERATORS[gate.op](_rounded(value), gate.limit)
        test = gate_test(gate, metrics) if gate.comparison else {}
        significant = None if test.get("p") is None else test["p"] < SIGNIFICANCE
        if gate.if_significant:
            passed = passed or (value is not None and significant is False)
        result = GateResult(gate=str(gate), metric=gate.metric, value=value, limit=gate.limit, passed=passed)
        for field, field_value in test.items():  # set, so written (nulls included); absent on the run's own gates
            setattr(result, field, field_value)
        if gate.if_significant:
            result.significant = significant
        results.append(result)
    return results


def tested_metric(metric: str) -> str:
    """The metric of comparison.metric_tests whose test a comparison gate reads: a change's own
    metric; accuracy's (McNemar's) for mcnemar_p, right_to_wrong, wrong_to_right."""
    gate = GATE_METRICS[metric]
    return gate.metric.name if gate.path[:2] == ("comparison", "deltas") else "accuracy"


def gate_test(gate: Gate, metrics: Any) -> dict:
    """A comparison gate's `method`, `p`, `ci` (oriented as the gate's value), `detectable_change`,
    and a `warning` when a change's limit is below what this comparison can detect."""
    path = ("comparison", "metric_tests", tested_metric(gate.metric))
    ci = value_at(metrics, (*path, "ci"))
    drop = GATE_METRICS[gate.metric].drop
    detectable = detectable_change(number_at(metrics, (*path, "se")))
    out = {
        "method": value_at(metrics, (*path, "method")),
        "p": number_at(metrics, (*path, "p")),
        "ci": None if ci is None else ([-ci[1], -ci[0]] if drop else [ci[0], ci[1]]),
        "detectable_change": detectable,
    }
    is_change = GATE_METRICS[gate.metric].path[:2] == ("comparison", "deltas")
    if is_change and detectable is not None and abs(gate.limit) < detectable:
        out["warning"] = (
            f"{gate}: the limit {gate.limit:g} is below the smallest change this comparison detects ({detectable:.3g}, "
            f"alpha {ALPHA:g}, 80% power, from the paired standard error): at this row count a real change of the "
            "limit's size cannot be told from noise"
        )
    return out


def failure_message(results: list[GateResult]) -> str | None:
    """One line naming each failed gate and its numbers; None when every gate passed."""
    failed = [r for r in results if not r.passed]
    if not failed:
        return None
    parts = []
    for r in failed:
        value = "no value" if r.value is None else f"{r.value:.6g}"
        text = f"{r.gate}: {r.metric} is {value}"
        if r.p is not None:
            text += f" (p {r.p:.3g}, {r.method})"
        parts.append(text)
    return f"{len(failed)} of {len(results)} {GATES_FAILED}: " + "; ".join(parts)
