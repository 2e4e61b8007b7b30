"""Quality gates: conditions on metrics.json that fail the run (after its outputs are published).

A gate is `{metric: "OP NUMBER"}` with OP one of >=, >, <=, <, e.g. `{"accuracy": ">=0.9"}`.
Metrics: the scalar metrics of metrics.json (SCALAR_METRICS) and, with `compare_to`, the
comparison's (COMPARISON_METRICS): `<metric>_drop` = other run - this run, `<metric>_delta` =
this run - other run, `mcnemar_p`, `right_to_wrong`, `wrong_to_right`. A comparison gate may end in
`if significant` (or `when significant`): it then fails only when McNemar's exact test on the rows
both runs scored says the runs differ (mcnemar_p < SIGNIFICANCE). A gate whose metric has no value
(a scoring-only run, an undefined ROC-AUC) fails: what cannot be checked does not pass.

Pure functions, no Prefect: the parameter model validates gates with them before anything runs.
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass

SIGNIFICANCE = 0.05

# gate metric -> path into metrics.json
SCALAR_METRICS: dict[str, tuple] = {
    "accuracy": ("accuracy",),
    "macro_f1": ("macro_f1",),
    "weighted_f1": ("weighted_f1",),
    "log_loss": ("log_loss",),
    "ece": ("ece",),
    "roc_auc_macro": ("roc_auc", "macro"),
    "average_precision_macro": ("average_precision", "macro"),
    "accuracy_ci_low": ("accuracy_ci", 0),
    "accuracy_ci_high": ("accuracy_ci", 1),
    **{f"top_{k}_accuracy": ("top_k_accuracy", str(k)) for k in range(2, 6)},
    "evaluated": ("evaluated",),
    "missing_predictions": ("missing_predictions",),
    "unmatched_predictions": ("unmatched_predictions",),
}
# the metrics whose difference between two runs the comparison reports (its "deltas")
DELTA_METRICS = ("accuracy", "macro_f1", "weighted_f1", "log_loss", "ece", "roc_auc_macro", "average_precision_macro")
COMPARISON_METRICS: dict[str, tuple] = {
    **{f"{m}_drop": ("comparison", "deltas", m) for m in DELTA_METRICS},
    **{f"{m}_delta": ("comparison", "deltas", m) for m in DELTA_METRICS},
    "mcnemar_p": ("comparison", "mcnemar_p"),
    "right_to_wrong": ("comparison", "flipped", "right_to_wrong"),
    "wrong_to_right": ("comparison", "flipped", "wrong_to_right"),
}
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
        return self.metric in COMPARISON_METRICS

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}" + (" if significant" if self.if_significant else "")


def parse_gate(metric: str, spec: str) -> Gate:
    """One gate from its metric name and its condition; ValueError with a message naming both."""
    if metric not in SCALAR_METRICS and metric not in COMPARISON_METRICS:
        raise ValueError(
            f"gate {metric!r}: unknown metric; gates read {', '.join(SCALAR_METRICS)}, and with compare_to "
            "<metric>_drop / <metric>_delta (for " + ", ".join(DELTA_METRICS) + "), mcnemar_p, right_to_wrong, wrong_to_right"
        )
    if not isinstance(spec, str):
        raise ValueError(f"gate {metric!r}: the condition must be text such as '>=0.9', not {spec!r}")
    match = _SPEC.match(spec)
    if not match:
        raise ValueError(f"gate {metric!r}: {spec!r} is not OP NUMBER with OP one of >=, >, <=, < (e.g. '>=0.9'; '<=0.01 if significant')")
    significant = bool(_SIGNIFICANT.search(spec))
    if significant and metric not in COMPARISON_METRICS:
        raise ValueError(f"gate {metric!r}: 'if significant' applies to comparison gates only (<metric>_drop, <metric>_delta, ...)")
    limit = float(match.group(2))
    if not math.isfinite(limit):  # 1e999 is inf: metrics.json is strict JSON, and such a gate means nothing
        raise ValueError(f"gate {metric!r}: the limit in {spec!r} is not a finite number")
    return Gate(metric, match.group(1), limit, significant)


def parse_gates(gates: dict[str, str]) -> list[Gate]:
    return [parse_gate(metric, spec) for metric, spec in gates.items()]


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


def _lookup(metrics: dict, path: tuple):
    value = metrics
    for key in path:
        if value is None:
            return None
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and len(value) > key else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def metric_value(metrics: dict, metric: str) -> float | None:
    """A scalar metric of metrics.json by its gate name (accuracy, roc_auc_macro, top_2_accuracy...)."""
    return _lookup(metrics, SCALAR_METRICS[metric])


def evaluate_gates(gates: dict[str, str], metrics: dict) -> list[dict]:
    """metrics.json's `gates`: [{gate, metric, value, limit, passed, ...}] in the order given."""
    results = []
    for gate in parse_gates(gates):
        path = SCALAR_METRICS.get(gate.metric) or COMPARISON_METRICS[gate.metric]
        value = _lookup(metrics, path)
        if value is not None and gate.metric.endswith("_drop"):
            value = -value  # deltas are this - other; a drop is other - this
        result = {"gate": str(gate), "metric": gate.metric, "value": value, "limit": gate.limit}
        passed = value is not None and OPERATORS[gate.op](_rounded(value), gate.limit)
        if gate.if_significant:
            p = _lookup(metrics, ("comparison", "mcnemar_p"))
            result["mcnemar_p"] = p
            result["significant"] = p is not None and p < SIGNIFICANCE
            passed = passed or (value is not None and not result["significant"])
        results.append(result | {"passed": passed})
    return results


def failure_message(results: list[dict]) -> str | None:
    """One line naming each failed gate and its numbers; None when every gate passed."""
    failed = [r for r in results if not r["passed"]]
    if not failed:
        return None
    parts = []
    for r in failed:
        value = "no value" if r["value"] is None else f"{r['value']:.6g}"
        text = f"{r['gate']}: {r['metric']} is {value}"
        if "mcnemar_p" in r and r["mcnemar_p"] is not None:
            text += f" (mcnemar_p {r['mcnemar_p']:.3g})"
        parts.append(text)
    return f"{len(failed)} of {len(results)} quality gate(s) failed: " + "; ".join(parts)
