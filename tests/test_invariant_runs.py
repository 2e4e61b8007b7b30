"""The model invariants end to end, with real scoring processes: non-finite scores fail the job
and publish nothing; a failing rank's own error reaches the flow's message; the flow process
never imports torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scorekeeper.errors import ScoringFailed
from scorekeeper.launch import Progress, ScoringProcesses
from scorekeeper.run_folder import RunFolder
from tests import prefect_session
from tests.helpers import make_rows, open_run_and_plan, run_flow, write_rows

pytestmark = pytest.mark.integration


def _nan_for_a_word(source: str, folder, word: str) -> set[int]:
    """A copy of the model whose embedding of `word`'s tokens is NaN: rows holding it score NaN."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    shutil.copytree(source, folder)
    ids = set(AutoTokenizer.from_pretrained(source)(word, add_special_tokens=False)["input_ids"])
    weights = load_file(str(folder / "model.safetensors"))
    name = next(k for k in weights if k.endswith("word_embeddings.weight"))
    weights[name][sorted(ids)] = float("nan")
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return ids


def test_nan_scores_fail_the_job_naming_the_first_rows_and_publish_nothing(tmp_path, models):
    """A scoring-only run (nothing evaluates it after scoring). The worker checks each range's
    output table before committing it (shards.refuse_non_finite, fed the model's outputs, not the
    input's labels), so a labelled run fails on the same path; tests/test_model_invariants.py
    checks which scores are non-finite and that such a range is never committed."""
    from transformers import AutoTokenizer

    ids = _nan_for_a_word(models["bert"], tmp_path / "m", "broken")
    rows = [{k: v for k, v in r.items() if k != "label"} for r in make_rows(30, seed=4)]
    tokenizer = AutoTokenizer.from_pretrained(models["bert"])
    bad = [i for i, r in enumerate(rows) if ids & set(tokenizer(r["text"])["input_ids"])]
    assert 5 < len(bad) < len(rows)  # some rows, not all
    write_rows(tmp_path / "in.csv", rows)
    with pytest.raises(ScoringFailed) as failed:
        run_flow(1, input_uri=str(tmp_path / "in.csv"), model_uri=str(tmp_path / "m"), output_uri=str(tmp_path / "out"), run_name="r")
    message = str(failed.value)
    assert message.startswith("rank 0: the model's scores are not finite (NaN or infinite) for ") and "\n" not in message
    assert f"first row_index {', '.join(map(str, bad[:5]))}:" in message
    run = tmp_path / "out" / "r"
    assert not (run / "predictions.parquet").exists() and not (run / "report").exists()
    assert not list((run / "work" / "commits").glob("*.json"))  # no range was committed


def test_the_failing_ranks_own_error_reaches_the_flow(tmp_path, models):
    """Two processes; one range's staged rows are damaged so that whichever rank claims it fails
    with an unexpected error: the flow's message starts with that rank's own line, not with
    torchrun's summary of which rank exited."""
    write_rows(tmp_path / "in.csv", make_rows(20))
    request, context, manifest, job = open_run_and_plan(
        2, input_uri=str(tmp_path / "in.csv"), model_uri=models["bert"], output_uri=str(tmp_path / "out"), run_name="r",
        rows_per_range=5,
    )  # fmt: skip
    staged = tmp_path / "out" / "r" / RunFolder.STAGED_INPUT
    table = pq.read_table(staged)
    row_index = table.column("row_index").to_pylist()
    row_index[10] += 1  # range 2 ([10, 15)) no longer starts where the plan says
    damaged = table.set_column(table.column_names.index("row_index"), "row_index", pa.array(row_index, pa.int64()))
    pq.write_table(damaged, staged, row_group_size=5)
    with pytest.raises(ScoringFailed) as failed:
        with ScoringProcesses(2, 60.0).start(context.run.uri + "/work/job.json") as processes:
            processes.follow(Progress(total_rows=20))
    first = str(failed.value).splitlines()[0]
    assert first.startswith(("rank 0: RuntimeError: staged row group 2", "rank 1: RuntimeError: staged row group 2")), first
    assert "(at shards.py:" in first and "does not hold rows [10, 15)" in first


def test_a_whole_run_never_imports_torch_in_the_flow_process(tmp_path, models):
    """The CLI on a tiny model, one scoring process: the flow process (this subprocess) plans,
    follows and evaluates without torch or transformers; the scoring process imports them."""
    write_rows(tmp_path / "in.csv", make_rows(6))
    code = (
        "import json, os, sys\n"
        "from scorekeeper.cli import main\n"
        f"rc = main(['run', '--input-uri', 'in.csv', '--model-uri', {models['bert']!r}, '--output-uri', 'runs', '--run-name', 'r'])\n"
        "print('MODULES ' + json.dumps({'rc': rc, 'loaded': [m for m in ('torch', 'transformers', 'peft') if m in sys.modules]}))\n"
        "sys.stdout.flush(); os._exit(0)\n"
    )
    env = prefect_session.cli_environment({**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("MODULES ")), None)
    assert line is not None, done.stderr[-3000:]
    assert json.loads(line.removeprefix("MODULES ")) == {"rc": 0, "loaded": []}
    assert pq.read_table(tmp_path / "runs" / "r" / "predictions.parquet").num_rows == 6
