"""What a comparison makes of its paired tests: each compared metric's test as metrics.json carries
it (`PairedTest`), the test a compared metric gets when nothing computes it (its pairing's method,
untested), Holm's correction within a family of tests (`FamilyTest`) and how many deltas carry a
p-value and are significant (`TestsCounted`)."""

from __future__ import annotations

from scorekeeper.evaluation.statistics import paired_tests as pt
from scorekeeper.metrics.document import FamilyTest, PairedTest, SignificantCounts, TestsCounted
from scorekeeper.metrics.registry import Metric, Pairing

# the test a compared metric gets when nothing computes it (p null)
METHODS = {
    Pairing.COUNT: pt.MCNEMAR,
    Pairing.ROW_MEAN: pt.NORMAL,
    Pairing.RANKING: pt.DELONG,
    Pairing.RESAMPLED: pt.BOOTSTRAP,
    Pairing.SAMPLED: pt.BOOTSTRAP,
}


def paired_test(test: dict) -> PairedTest:
    return PairedTest(delta=test["delta"], ci=test["ci"], p=test["p"], method=test["method"], se=test["se"])


def metric_tests(compared: list[Metric], tests: dict[str, dict]) -> dict[str, PairedTest]:
    """Every compared metric's test: the one computed, else its pairing's method untested."""
    untested = {m.name: pt.untested(METHODS[m.compared]) for m in compared if m.compared is not None}
    return {m.name: paired_test(tests.get(m.name) or untested[m.name]) for m in compared}


def with_holm(tests: dict[tuple, dict]) -> dict[tuple, FamilyTest]:
    """One family's tests as metrics.json carries them: with Holm's adjusted p-value, without se."""
    keys = list(tests)
    adjusted = pt.holm([tests[k]["p"] for k in keys])
    return {
        k: FamilyTest(delta=tests[k]["delta"], ci=tests[k]["ci"], p=tests[k]["p"], p_holm=a, method=tests[k]["method"])
        for k, a in zip(keys, adjusted, strict=True)
    }


def counted(metric_tests: list[dict], per_class_tests: dict, slice_tests: dict) -> TestsCounted:
    """How many deltas carry a p-value, and how many are significant (the families after Holm)."""
    families = {
        "metric_tests": (metric_tests, False),
        "per_class_tests": ([t.model_dump() for c in per_class_tests.values() for t in c.values()], True),
        "slice_tests": ([t.model_dump() for g in slice_tests.values() for t in g.values()], True),
    }
    number = {name: sum(t["p"] is not None for t in tests) for name, (tests, _) in families.items()}
    significant = {name: sum(pt.significant(t, holm) for t in tests) for name, (tests, holm) in families.items()}
    return TestsCounted(
        metric_tests=number["metric_tests"],
        per_class_tests=number["per_class_tests"],
        slice_tests=number["slice_tests"],
        significant=SignificantCounts.model_validate(significant),
    )
