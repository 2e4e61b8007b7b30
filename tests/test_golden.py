"""The published outputs of a fixed set of evaluations (bench/golden.py: every head kind, ground
truth from the label column and from files, slices, comparisons with their paired tests, gates, the
history, the label audit) are those of tests/golden/snapshot.json: the same metrics.json keys and
values (floats to 1e-9), the same parquet columns, and the same bytes of report.md, report.html
(its `data-value` numbers held to metrics.json instead: bench/golden.py's snapshot) and every SVG. A change that
means to change an output stores a new snapshot (`bench/golden.py --snapshot`) in the same commit."""

from __future__ import annotations

import json
from pathlib import Path

from bench.golden import compare_snapshot

SNAPSHOT = Path(__file__).with_name("golden") / "snapshot.json"


def test_the_golden_evaluations_publish_what_the_snapshot_holds(golden_build):
    out, _ = golden_build  # tests/conftest.py: bench/golden.py's build, once per session
    problems = compare_snapshot(out, json.loads(SNAPSHOT.read_text()))
    assert not problems, "\n".join(problems[:40])


def test_every_section_view_of_the_golden_runs_holds_no_document_record(golden_build):
    """tests/test_report_views.py's dynamic check over every golden run: each section is reached."""
    from scorekeeper.metrics.document import MetricsDocument
    from scorekeeper.report.report import SECTION_VIEWS
    from scorekeeper.run_facts import RunFacts
    from tests.test_report_views import check_views

    out, _ = golden_build
    facts = RunFacts.of({"run_id": "g", "input_uri": "in", "model_uri": "m", "mode": "replica", "num_processes": 1, "id_column": "id"})
    shown: set[str] = set()
    for path in sorted(out.glob("*/metrics.json")):
        shown |= check_views(MetricsDocument.model_validate_json(path.read_text()).finite(), facts)
    assert shown == set(SECTION_VIEWS) - {"groups"}  # a fanned-out run's groups: tests/test_fan_out.py
