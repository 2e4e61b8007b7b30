"""bench/evaluate_profile.py: the evaluation's statements timed over a run folder, and its check
that the recomputed metrics are the run's own."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from bench.evaluate_profile import main
from tests.evaluation_runs import write_run

LABELS = ["negative", "neutral", "positive"]


def test_the_profile_recomputes_the_runs_metrics_and_says_when_they_differ(tmp_path, capsys):
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(3), size=200)
    truth = pa.array([LABELS[i] for i in rng.integers(0, 3, size=200)])
    run, manifest, metrics = write_run(tmp_path, "run", probs, LABELS, truth)
    run.publish_manifest(manifest)
    assert main([str(tmp_path / "run"), "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "metrics: the same as the run's metrics.json" in out
    assert len([line for line in out.splitlines() if line.startswith(" ")]) == 5  # the five slowest statements

    stored = tmp_path / "run" / "report" / "metrics.json"
    changed = json.loads(stored.read_text())
    changed["accuracy"] = metrics["accuracy"] + 1e-6
    stored.write_text(json.dumps(changed))
    assert main([str(tmp_path / "run")]) == 1
    assert ".accuracy:" in capsys.readouterr().out
    # the evaluation's own connection is back for whatever runs next in this process
    from scorekeeper.evaluation import driver as evaluate
    from scorekeeper.evaluation.duck import connect_run

    assert evaluate.connect_run is connect_run
