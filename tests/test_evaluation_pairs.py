"""Every evaluation-only parameter met with every other: compare_to x drift_reference x slices x the
window (length_impact, the report's length section) x gates, under every kind of head (each kind
has its own code for each feature, scorekeeper/evaluation/<kind>.py), over generated runs
(tests/generated_runs.py). The runs are written once per module; each case evaluates a labelled
and an unlabelled night as the evaluate step does and renders their reports. Per kind of head the
cases are a covering array of all pairs of levels (checked here), not the full product: no two
features meet for the first time in a user's run.

Each case checks what holds whatever met: the evaluation and both reports complete, the document
survives metrics.json, and each feature's section is there exactly when it was asked for (and
could be computed)."""

from __future__ import annotations

import itertools
import random

import pytest

from scorekeeper.head_kind import HeadKind
from scorekeeper.metrics.document import MetricsDocument
from tests import generated_runs as gen

HEADS = [HeadKind.SINGLE_LABEL, HeadKind.MULTI_LABEL, HeadKind.REGRESSION]
FACTORS: dict[str, list] = {
    # none; the night's own input scored by another model (paired on row_index); another input whose
    # ids match none of the night's (nothing to compare: the nightly run against last night's)
    "compare_to": [None, "same-input", "other-input"],
    # none; a labelled reference (judged: >= 100 rows on both sides); a 60-row one (not judged)
    "drift_reference": [None, "reference", "small"],
    "slices": [False, True],
    "max_length": [None, 40],
    "gates": [False, True],
}
HEADLINE = {HeadKind.SINGLE_LABEL: "accuracy", HeadKind.MULTI_LABEL: "micro_f1", HeadKind.REGRESSION: "mae"}
ESTIMATED = {HeadKind.SINGLE_LABEL: "estimated_accuracy", HeadKind.MULTI_LABEL: "estimated_micro_f1", HeadKind.REGRESSION: "estimated_mae"}


def pairs_of(case: dict) -> set[tuple]:
    return {((a, repr(case[a])), (b, repr(case[b]))) for a, b in itertools.combinations(FACTORS, 2)}


def covering_array(seed: int = 0, candidates: int = 40) -> list[dict]:
    """Cases covering every pair of levels of two factors: greedily, the candidate (of `candidates`
    drawn, each seeded on an uncovered pair) that covers the most pairs still uncovered."""
    rng = random.Random(seed)
    wanted = {
        ((a, repr(x)), (b, repr(y))) for a, b in itertools.combinations(FACTORS, 2) for x in FACTORS[a] for y in FACTORS[b]
    }  # fmt: skip
    cases: list[dict] = []
    while wanted:
        best, gain = None, -1
        target = sorted(wanted)[rng.randrange(len(wanted))]
        for _ in range(candidates):
            case = {name: rng.choice(levels) for name, levels in FACTORS.items()}
            for factor, level in target:
                case[factor] = next(v for v in FACTORS[factor] if repr(v) == level)
            covered = len(pairs_of(case) & wanted)
            if covered > gain:
                best, gain = case, covered
        assert best is not None
        cases.append(best)
        wanted -= pairs_of(best)
    return cases


CASES = [case | {"head": head} for head in HEADS for case in covering_array(seed=len(head))]


@pytest.mark.parametrize("head", HEADS)
def test_the_cases_cover_every_pair_of_levels_under_every_head(head):
    cases = [c for c in CASES if c["head"] == head]
    covered = set().union(*(pairs_of(c) for c in cases))
    for a, b in itertools.combinations(FACTORS, 2):
        for x, y in itertools.product(FACTORS[a], FACTORS[b]):
            assert ((a, repr(x)), (b, repr(y))) in covered, (a, x, b, y)
    assert len(cases) < 14  # a covering array, not the product (3 * 3 * 2 * 2 * 2 = 72)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Per kind of head, the runs a night is evaluated against (published) and the night, labelled
    and not: one folder per kind."""
    roots = {}
    for head in HEADS:
        root = tmp_path_factory.mktemp(str(head))
        night = gen.Spec(rows=120, seed=7, shift=0.6)
        gen.write(root / "reference", head, gen.Spec(rows=120, seed=3, fingerprint="reference"))
        gen.write(root / "small", head, gen.Spec(rows=60, seed=4, fingerprint="small"))
        gen.write(root / "same-input", head, night, model_seed=1)
        gen.write(root / "other-input", head, gen.Spec(rows=120, seed=5, fingerprint="other", first_id=10_000))
        for name in ("reference", "small", "same-input", "other-input"):
            gen.publish(root, name, gen.evaluate(root, name, head))
        gen.write(root / "night", head, night)
        gen.write(root / "night-unlabelled", head, gen.Spec(rows=120, seed=7, shift=0.6, labelled=False))
        roots[head] = root
    return roots


def gates_of(case: dict) -> dict[str, str]:
    head = case["head"]
    gates = {HEADLINE[head]: "<=1000" if head == HeadKind.REGRESSION else ">=0.0"}
    if case["compare_to"]:
        gates[HEADLINE[head] + "_delta"] = ">=-1000"
    if case["drift_reference"]:
        gates["drifted_signals"] = "<=1000"
        gates[ESTIMATED[head]] = "<=1000" if head == HeadKind.REGRESSION else ">=0.0"
    return gates


@pytest.mark.parametrize("case", CASES, ids=[f"{c['head']}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("labelled", [True, False], ids=["labelled", "unlabelled"])
def test_every_pair_of_evaluation_parameters_evaluates_and_reports(runs, case, labelled):
    head, root = case["head"], runs[case["head"]]
    name = "night" if labelled else "night-unlabelled"
    gates = gates_of(case) if case["gates"] else None
    document = gen.evaluate(
        root, name, head, baseline=case["compare_to"], reference=case["drift_reference"], slices=case["slices"],
        max_length=case["max_length"], gates=gates,
    )  # fmt: skip
    markdown, html = gen.render(document, name)
    again = MetricsDocument.model_validate_json(document.to_json_bytes())
    assert again.as_dict() == document.as_dict()

    evaluated = bool(document.evaluated)
    assert evaluated == labelled
    if case["compare_to"] and evaluated:
        assert document.comparison is not None
        assert document.comparison.rows_compared == (120 if case["compare_to"] == "same-input" else 0)
        assert "## Compared with" in markdown or "Compared with" in markdown
    else:
        assert document.comparison is None
    if case["drift_reference"]:
        drift = document.drift
        assert drift is not None and drift.reference == case["drift_reference"]
        assert drift.rows.current == 120 and drift.rows.reference == (120 if case["drift_reference"] == "reference" else 60)
        assert ("slice:source" in drift.signals) == case["slices"]
        judged = [s for s in drift.signals.values() if s.drifted is not None]
        assert bool(judged) == (case["drift_reference"] == "reference")
        assert document.estimated is not None
        assert "drift" in markdown.lower()
    else:
        assert document.drift is None and document.estimated is None
    assert (document.length_impact is not None) == (case["max_length"] is not None and evaluated)
    if case["max_length"] is not None:
        assert "What the length costs" in markdown and "What the length costs" in html
    assert bool(document.slices) == (case["slices"] and evaluated)
    if gates:
        assert [g.metric for g in document.gates] == list(gates)
        for g in document.gates:
            assert g.passed == (g.value is not None), g  # generous limits: only a missing value fails
