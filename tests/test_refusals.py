"""Odd input that used to give a wrong answer or a traceback: each case is refused with one clear
message before anything is written, or answered right. Fast tier: no subprocess."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scorekeeper.errors import InputError, ModelError, RunConflict
from scorekeeper.evaluation.driver import evaluate_run
from scorekeeper.params import ScoreRequest
from scorekeeper.run_folder import RunFolder
from scorekeeper.storage import Location
from scorekeeper.tasks.open_run import check_resumable, open_run, request_record
from scorekeeper.tasks.read import read_inputs
from tests.helpers import LABELS, basic_auth_server, make_rows, open_run_and_plan, write_rows


def _request(tmp_path, input_uri, **params) -> ScoreRequest:
    defaults = dict(input_uri=str(input_uri), model_uri="unused", output_uri=str(tmp_path / "out"), run_name="r")
    return ScoreRequest(**(defaults | params))


def _stage(tmp_path, input_uri, **params):
    request = _request(tmp_path, input_uri, **params)
    run = RunFolder.under(request.output_uri, request.run_name)
    return request, run, read_inputs(request, run)


def _model_copy(models, tmp_path, name="model") -> Path:
    folder = tmp_path / name
    shutil.copytree(models["bert"], folder)
    return folder


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _predict(run: Location, labels: list[str], predicted: list[int]) -> None:
    """A predictions.parquet as the gather step writes it: row i predicted as `predicted[i]`."""
    n = len(predicted)
    probabilities = [[0.9 if j == p else 0.1 / (len(labels) - 1) for j in range(len(labels))] for p in predicted]
    table = pa.table(
        {
            "row_index": pa.array(range(n), pa.int64()),
            "id": pa.array(range(n), pa.int64()),
            "predicted_id": pa.array(predicted, pa.int64()),
            "predicted_label": [labels[p] for p in predicted],
            "score": [0.9] * n,
            "probabilities": probabilities,
        }
    )
    pq.write_table(table, run.join("predictions.parquet"))


def _assert_nothing_written(tmp_path):
    assert not (tmp_path / "out" / "r").exists(), sorted(str(p) for p in (tmp_path / "out").rglob("*"))


# -- 1. a tokenizer that cannot encode ordinary text ----------------------------------------------


def test_model_folder_without_tokenizer_files_is_refused(tmp_path, models):
    folder = _model_copy(models, tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        (folder / name).unlink(missing_ok=True)
    write_rows(tmp_path / "in.csv", make_rows(3))
    with pytest.raises(ModelError, match=rf"model folder {folder} has no tokenizer files"):
        open_run_and_plan(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r")
    _assert_nothing_written(tmp_path)

    # The scoring processes refuse it too (transformers 5 builds an all-[UNK] tokenizer here).
    from scorekeeper.worker.model import load_tokenizer

    with pytest.raises(ModelError, match=rf"tokenizer in {folder} cannot encode any text"):
        load_tokenizer(str(folder), trust_remote_code=False)


def test_tokenizer_with_only_special_tokens_is_refused(tmp_path, models):
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models

    folder = _model_copy(models, tmp_path)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(tok_models.WordPiece({t: i for i, t in enumerate(specials)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.add_special_tokens(specials)
    tokenizer.save(str(folder / "tokenizer.json"))
    write_rows(tmp_path / "in.csv", make_rows(3))
    with pytest.raises(ModelError, match=r"cannot encode any text: its vocabulary has 5 token\(s\), 5 of them special"):
        open_run_and_plan(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r")
    _assert_nothing_written(tmp_path)
    from scorekeeper.worker.model import load_tokenizer

    with pytest.raises(ModelError, match="cannot encode any text"):
        load_tokenizer(str(folder), trust_remote_code=False)
    load_tokenizer(models["bert"], trust_remote_code=False)  # a real one passes
    load_tokenizer(models["llama"], trust_remote_code=False)


def _word_level_tokenizer(folder: Path, words: list[str]) -> None:
    """A word-level tokenizer.json over `words` (and the BERT specials), as a domain tokenizer is."""
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers import models as tok_models

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate(specials + sorted(set(words)))}
    tokenizer = Tokenizer(tok_models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.add_special_tokens(specials)
    tokenizer.save(str(folder / "tokenizer.json"))


def test_a_domain_tokenizer_trained_on_the_rows_is_accepted(tmp_path, models):
    """Product codes no English, German, Russian or Chinese sentence holds: the check is on the rows."""
    folder = _model_copy(models, tmp_path)
    rng = np.random.default_rng(4)
    codes = [f"SKU{n:05d}" for n in rng.integers(0, 99999, 60)]
    rows = [{"id": i, "text": " ".join(rng.choice(codes, 4)), "label": "pos" if i % 2 else "neg"} for i in range(600)]
    _word_level_tokenizer(folder, codes)
    write_rows(tmp_path / "in.csv", rows)
    _, _, manifest, _ = open_run_and_plan(
        input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r"
    )
    assert manifest.total_rows == 600
    from scorekeeper.worker.model import load_tokenizer

    ids = load_tokenizer(str(folder), trust_remote_code=False)(codes[0])["input_ids"]
    assert len(ids) == 3 and ids[1] > 4  # [CLS] the code [SEP]: an ordinary token of the vocabulary


@pytest.mark.parametrize("vocabulary", ["english", "three words"])
def test_rows_the_tokenizer_turns_into_unknown_tokens_only_are_refused_naming_a_row(tmp_path, models, vocabulary):
    """DNA rows against a tokenizer of English reviews, or of three words: refused on the rows, with
    advice that fits the tokenizer (a real vocabulary that does not cover the text, or one that is not
    the model's), before anything is published."""
    folder = _model_copy(models, tmp_path)
    if vocabulary == "three words":
        _word_level_tokenizer(folder, ["good", "bad", "fine"])
    rng = np.random.default_rng(5)
    rows = [{"id": i, "text": "".join(rng.choice(list("ACGT"), 40)) + "✨", "label": "pos"} for i in range(700)]
    rows[3]["text"] = ""  # an empty text is not judged
    write_rows(tmp_path / "in.csv", rows)
    advice = "vocabulary holds only 3 ordinary token" if vocabulary == "three words" else r"does not cover this text: give the tokenizer"
    with pytest.raises(
        ModelError,
        match=rf"turns every one of the \d+ input rows it was tried on .* into unknown or special tokens only, e.g. row_index 0 '{rows[0]['text'][:20]}.*{advice}",
    ) as refused:
        open_run_and_plan(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r")
    message = str(refused.value)
    assert "\n" not in message and ("save_pretrained" in message) == (vocabulary == "three words")
    assert not (tmp_path / "out" / "r" / "work" / "input.parquet").exists()

    rows[1]["text"] = "the delivery was fine"  # one row with an ordinary token: the input is encodable
    write_rows(tmp_path / "in.csv", rows)
    open_run_and_plan(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r2")


def test_model_code_in_the_folder_is_not_run_without_trust_remote_code(tmp_path, models):
    """A folder whose config names code of its own (`auto_map`) is loaded with transformers' own
    classes: not one line of the folder's code runs unless trust_remote_code is set."""
    import torch

    from scorekeeper.worker.model import load_model

    folder = _model_copy(models, tmp_path)
    ran = tmp_path / "the folder's code ran"
    (folder / "custom_model.py").write_text(
        f"from pathlib import Path\nPath({str(ran)!r}).write_text('ran')\n"
        "from transformers import BertConfig, BertForSequenceClassification\n"
        "class CustomConfig(BertConfig):\n    pass\n"
        "class CustomModel(BertForSequenceClassification):\n    config_class = CustomConfig\n"
    )
    _edit_config(
        folder,
        auto_map={"AutoConfig": "custom_model.CustomConfig", "AutoModelForSequenceClassification": "custom_model.CustomModel"},
    )
    loaded = load_model(
        str(folder), None, merge_adapter=False, dtype=torch.float32, device=torch.device("cpu"), trust_remote_code=False, max_length=None
    )
    assert type(loaded.model).__name__ == "BertForSequenceClassification"
    assert not ran.exists()


# -- 2. ground truth changed in place ------------------------------------------------------------


def test_changed_ground_truth_is_evaluated_again(tmp_path, caplog):
    rows = make_rows(12, seed=4)
    write_rows(tmp_path / "in.csv", [{"review_id": r["review_id"], "text": r["text"]} for r in rows])
    truth = tmp_path / "gt.csv"
    write_rows(truth, [{"review_id": r["review_id"], "gold": "negative"} for r in rows])
    params = dict(id_column="review_id", ground_truth_uri=str(truth), label_column="gold")
    request, run, manifest = _stage(tmp_path, tmp_path / "in.csv", **params)
    _predict(run, LABELS, [0] * 12)  # every row predicted "negative"
    assert evaluate_run(run, LABELS, manifest).as_dict()["accuracy"] == 1.0

    write_rows(truth, [{"review_id": r["review_id"], "gold": "positive"} for r in rows])  # same path, new content
    with caplog.at_level(logging.WARNING):
        request, run, manifest = _stage(tmp_path, tmp_path / "in.csv", **params)
    assert "the ground truth changed since the last attempt" in caplog.text and "gt.csv" in caplog.text
    assert evaluate_run(run, LABELS, manifest).as_dict()["accuracy"] == 0.0


# -- 3. ids keep their spelling ------------------------------------------------------------------


def test_csv_ids_keep_their_spelling(tmp_path, caplog):
    rows = make_rows(50, seed=5)
    write_rows(tmp_path / "in.csv", [{"rid": f"{i + 1:03d}", "text": r["text"]} for i, r in enumerate(rows)])
    write_rows(tmp_path / "gt.csv", [{"rid": f"{i + 1:03d}", "label": r["label"]} for i, r in enumerate(rows)])
    request, run, manifest = _stage(tmp_path, tmp_path / "in.csv", id_column="rid", ground_truth_uri=str(tmp_path / "gt.csv"))
    staged = pq.read_table(run.join("work", "input.parquet"))
    assert staged.column("id").to_pylist()[:3] == ["001", "002", "003"]
    assert manifest.id_type == manifest.ground_truth.id_type == "string"
    _predict(run, LABELS, [LABELS.index(r["label"]) for r in rows])
    metrics = evaluate_run(run, LABELS, manifest).as_dict()
    assert (metrics["evaluated"], metrics["accuracy"], metrics["missing_predictions"]) == (50, 1.0, 0)

    # `7` and `007` are two ids, not duplicates.
    write_rows(tmp_path / "two.csv", [{"rid": "7", "text": "a"}, {"rid": "007", "text": "b"}])
    _, run2, _ = _stage(tmp_path, tmp_path / "two.csv", id_column="rid", run_name="two")
    assert pq.read_table(run2.join("work", "input.parquet")).column("id").to_pylist() == ["7", "007"]


def test_integer_ids_against_text_ids_say_how_many_matched(tmp_path, caplog):
    from scorekeeper.cli import summary_line

    rows = make_rows(4, seed=6)
    pq.write_table(pa.table({"rid": pa.array([7, 8, 9, 10], pa.int64()), "text": [r["text"] for r in rows]}), tmp_path / "in.parquet")
    write_rows(tmp_path / "gt.csv", [{"rid": f"{i:03d}", "label": "positive"} for i in (7, 8, 9, 10)])
    _, run, manifest = _stage(tmp_path, tmp_path / "in.parquet", id_column="rid", ground_truth_uri=str(tmp_path / "gt.csv"))
    assert manifest.id_type == "int64" and manifest.ground_truth.id_type == "string"  # Parquet keeps its type
    _predict(run, LABELS, [2, 2, 2, 2])
    with caplog.at_level(logging.WARNING):
        metrics = evaluate_run(run, LABELS, manifest).as_dict()
    assert "compared as text; 0 of 4 ground-truth rows matched an input id" in caplog.text
    assert metrics["evaluated"] == 0 and metrics["ground_truth_rows"] == 4 and not metrics["scoring_only"]
    line = summary_line({"run_id": "r", "rows": 4, "run_uri": "out/r", "metrics": metrics})
    assert "scoring only" not in line and "evaluated 0 of 4 (ground truth: 0 of 4 rows matched an input row)" in line


def test_a_label_column_with_no_label_of_the_model_is_said_in_the_summary(tmp_path):
    """Every ground-truth value unknown (say, --label-column pointing at the wrong column): the
    numbers are right (every row an error), and the last line says why they are what they are."""
    from scorekeeper.cli import summary_line

    rows = [{"rid": f"r{i}", "text": "good movie", "label": f"stars-{i}"} for i in range(3)]
    write_rows(tmp_path / "in.csv", rows)
    _, run, manifest = _stage(tmp_path, tmp_path / "in.csv", id_column="rid")
    _predict(run, LABELS, [0, 1, 2])
    metrics = evaluate_run(run, LABELS, manifest).as_dict()
    assert metrics["unknown_label_rows"] == metrics["evaluated"] == 3 and metrics["accuracy"] == 0.0
    line = summary_line({"run_id": "r", "rows": 3, "run_uri": "out/r", "metrics": metrics})
    assert "WARNING: no ground-truth value of the 3 evaluated rows is a label of the model" in line
    metrics["unknown_label_rows"] = 2
    assert "WARNING" not in summary_line({"run_id": "r", "rows": 3, "run_uri": "out/r", "metrics": metrics})


# -- 4. / 5. label maps a softmax classifier cannot be evaluated with ----------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"id2label": {"0": "neg", "1": "neg", "2": "pos"}}, r"id2label repeats label names \('neg' for ids 0, 1\)"),
        ({"id2label": {"1": "neg", "2": "neu", "3": "pos"}}, r"id2label ids must be 0\.\.2 \(one per output\), found \[1, 2, 3\]"),
        ({"id2label": {"0": "neg", "x": "pos"}}, r"id2label keys must be integer ids"),
    ],
    ids=["repeated-name", "ids-not-from-0", "ids-not-integers"],
)
def test_label_maps_with_repeated_names_or_odd_ids_are_refused(tmp_path, models, changes, message):
    folder = _model_copy(models, tmp_path)
    _edit_config(folder, **changes)
    write_rows(tmp_path / "in.csv", make_rows(3))
    with pytest.raises(ModelError, match=rf"model in {folder}: {message}"):
        open_run_and_plan(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r")
    _assert_nothing_written(tmp_path)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}, "problem_type": None},
            r"single output \(num_labels=1\) and its config names no problem_type: say what its output is with head "
            r"\(--head\): 'regression' scores the raw value .*; 'multi_label' scores a one-logit binary classifier or reranker",
        ),
    ],
    ids=["one-output"],
)
def test_a_one_logit_head_without_problem_type_is_refused_naming_both_choices(tmp_path, models, changes, message):
    """Regression and multi-label heads are scored (tests/test_heads_*.py); a single output whose
    config does not say what it is cannot be guessed: a softmax over it is always 1.0."""
    folder = _model_copy(models, tmp_path)
    _edit_config(folder, **changes)
    write_rows(tmp_path / "in.csv", make_rows(3))
    with pytest.raises(ModelError, match=message):
        open_run_and_plan(input_uri=str(tmp_path / "in.csv"), model_uri=str(folder), output_uri=str(tmp_path / "out"), run_name="r")
    _assert_nothing_written(tmp_path)
    # the scoring processes' own check (from the loaded config) says the same
    from transformers import AutoConfig

    from scorekeeper.heads import resolve_head

    config = AutoConfig.from_pretrained(str(folder))
    with pytest.raises(ModelError, match=message):
        resolve_head("auto", {"id2label": dict(config.id2label), "num_labels": config.num_labels, "problem_type": config.problem_type}, "x")


# -- 8. a lease whose owner died on this host ----------------------------------------------------


def test_lease_of_a_dead_process_on_this_host_is_taken_over_at_once(tmp_path):
    from scorekeeper.lease import generation_name, lease_holder, run_lease

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run = RunFolder.from_uri(str(tmp_path / "run"))
    record = {
        "owner": "another-flow-run",
        "host": socket.gethostname(),
        "pid": dead.pid,
        "started": time.time() - 5,
        "renewed_at": time.time(),
    }
    run.publish_json(record, generation_name(0))
    with run_lease(run, "run", owner="me"):
        assert lease_holder(run)["owner"] == "me"
    # a live owner (this very process) still blocks
    with run_lease(run, "run", owner="first"):
        with pytest.raises(RunConflict, match="is being written by another job"):
            with run_lease(run, "run", owner="second"):
                pass


# -- 9. output folder inside the input folder ----------------------------------------------------


@pytest.mark.parametrize("as_glob", [False, True], ids=["folder", "glob"])
def test_the_runs_own_folder_is_not_input(tmp_path, as_glob):
    from scorekeeper.lease import run_lease

    data = tmp_path / "data"
    rows = make_rows(6)
    write_rows(data / "a.jsonl", rows[:3])
    write_rows(data / "b.jsonl", rows[3:])
    request = ScoreRequest(
        input_uri=str(data / "**" / "*.json*") if as_glob else str(data), model_uri="unused", output_uri=str(data / "runs"), run_name="r"
    )
    run = RunFolder.under(request.output_uri, "r")
    write_rows(Path(run.join("work", "stale.jsonl")), rows[:1])  # a file an earlier attempt left
    with run_lease(run, "r", owner="me"):  # the lease file sits in the run folder while it reads
        manifest = read_inputs(request, run)
    assert [Path(f.uri).name for f in manifest.files] == ["a.jsonl", "b.jsonl"] and manifest.total_rows == 6


def test_earlier_runs_beside_this_one_are_not_input(tmp_path):
    """A second run under the same output_uri inside the input folder: the first run's request,
    staged input and predictions are skipped too, not read as rows (or refused as odd files)."""
    data = tmp_path / "data"
    rows = make_rows(5)
    write_rows(data / "a.jsonl", rows)
    earlier = data / "runs" / "first"
    (earlier / "request.json").parent.mkdir(parents=True)
    (earlier / "request.json").write_text("{}")
    write_rows(earlier / "work" / "predictions.jsonl", rows[:2])
    write_rows(data / "runs" / "notes" / "extra.jsonl", rows[:1])  # not a run folder: still input
    request = ScoreRequest(input_uri=str(data), model_uri="unused", output_uri=str(data / "runs"), run_name="second")
    manifest = read_inputs(request, RunFolder.under(request.output_uri, "second"))
    assert [Path(f.uri).name for f in manifest.files] == ["a.jsonl", "extra.jsonl"] and manifest.total_rows == 6


# -- 10. unusable output_uri, ids beyond int64 ----------------------------------------------------


def test_output_uri_that_is_a_file_is_refused_before_anything_is_written(tmp_path, models):
    from scorekeeper.tasks.open_run import check_output_uri

    write_rows(tmp_path / "in.csv", make_rows(3))
    (tmp_path / "taken").write_text("a file")
    for output in (tmp_path / "taken", tmp_path / "taken" / "below"):
        with pytest.raises(InputError, match=rf"output_uri {output} (is a file|cannot be a folder: {tmp_path / 'taken'} is a file)"):
            open_run(ScoreRequest(input_uri=str(tmp_path / "in.csv"), model_uri=models["bert"], output_uri=str(output), run_name="r"), None)
    assert (tmp_path / "taken").read_text() == "a file"
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(InputError, match=r"is not writable: no permission to create files in"):
            check_output_uri(str(locked / "runs"))


def test_uint64_ids_beyond_int64_are_refused_naming_the_row(tmp_path):
    ids = pa.array([1, 2, 2**63 + 5], pa.uint64())
    pq.write_table(pa.table({"rid": ids, "text": ["a", "b", "c"]}), tmp_path / "big.parquet")
    with pytest.raises(InputError, match=r"id column 'rid' in .*big.parquet holds 9223372036854775813 \(first at row_index 2\)"):
        _stage(tmp_path, tmp_path / "big.parquet", id_column="rid")
    assert not (tmp_path / "out" / "r" / "work" / "input.parquet").exists()


def test_json_ids_beyond_int64_read_as_doubles_are_refused_saying_to_write_them_as_strings(tmp_path):
    """pyarrow's JSON reader holds an integer beyond int64 as a double: the column is refused as
    floating, saying why a column of integers is one, never rounded into ids that collide."""
    (tmp_path / "big.jsonl").write_text('{"rid": 18446744073709551615, "text": "a"}\n{"rid": 1, "text": "b"}\n')
    with pytest.raises(InputError, match=r"id column 'rid' in .*big.jsonl is double; .*beyond int64.*: write the ids as strings$"):
        _stage(tmp_path, tmp_path / "big.jsonl", id_column="rid")


# -- 11. passwords in URIs -----------------------------------------------------------------------


@pytest.fixture
def http_data(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    with basic_auth_server(served, "reader", "pa55-W0rd") as host:
        yield served, f"http://reader:pa55-W0rd@{host}"


def test_no_file_of_the_run_holds_a_password_from_a_uri(tmp_path, models, http_data):
    from scorekeeper.boundary import Job, run_uri_of

    served, base = http_data
    write_rows(served / "in.csv", make_rows(5))
    request, context, manifest, job = open_run_and_plan(
        input_uri=f"{base}/in.csv", model_uri=models["bert"], output_uri=str(tmp_path / "out"), run_name="r"
    )
    assert manifest.total_rows == 5  # the input was read with its password
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert {"request.json", "plan.json", "job.json", "staged.json"} <= {p.name for p in files}
    for path in files:
        assert b"pa55-W0rd" not in path.read_bytes(), path
    assert json.loads((tmp_path / "out" / "r" / "request.json").read_text())["input_uri"].startswith("http://***@127.0.0.1:")
    # The worker gets the run's real URI from its job file's own URI, not from job.json.
    secret_run = "s3://key:pa55-W0rd@bucket/runs/r"
    assert run_uri_of(f"{secret_run}/{RunFolder.JOB}") == secret_run
    written = Job.from_json(job.to_json())
    assert written.run_uri == job.run_uri
    with pytest.raises(InputError) as refused:
        read_inputs(_request(tmp_path, f"{base}/missing.csv", run_name="m"), RunFolder.from_uri(str(tmp_path / "out" / "m")))
    assert "pa55-W0rd" not in str(refused.value) and "http://***@127.0.0.1" in str(refused.value)


def test_redaction_of_every_uri_spelling():
    from scorekeeper.redact import redact_text

    assert redact_text("s3://AKIA:se/cret+k@bucket/x") == "s3://***@bucket/x"  # AWS secrets hold '/'
    assert redact_text("https://token@host/x") == "https://***@host/x"
    for text in ("https://u:p@host/a", "s3://key:secret@bucket/k", "postgresql+asyncpg://u:p@db:5432/x", "see 'ftp://a:b@h/f' now"):
        redacted = redact_text(text)
        assert ":p@" not in redacted and "secret" not in redacted and ":b@" not in redacted and "***@" in redacted, redacted
    assert redact_text("mailto a@b and s3://bucket/k@v") == "mailto a@b and s3://bucket/k@v"
    params = ScoreRequest(input_uri="https://u:pw@h/in.csv", model_uri="s3://k:pw@b/m", output_uri="s3://k:pw@b/o").public_dict()
    assert "pw" not in json.dumps(params)
    assert "pw" not in str(InputError("input not found: https://u:pw@h/in.csv"))


# -- 12. / 13. zstd files, string_view columns ---------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv.zst", ".jsonl.zstd"])
def test_zstd_compressed_text_files_are_read(tmp_path, suffix):
    rows = make_rows(7)
    plain = write_rows(tmp_path / f"plain.{suffix.split('.')[1]}", rows)
    with pa.CompressedOutputStream(str(tmp_path / f"rows{suffix}"), "zstd") as out:
        out.write(plain.read_bytes())
    _, _, manifest = _stage(tmp_path, tmp_path / f"rows{suffix}")
    staged = pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet")
    assert manifest.total_rows == 7 and staged.column("text").to_pylist() == [r["text"] for r in rows]


def test_string_view_and_large_string_columns_are_text(tmp_path):
    rows = make_rows(5)
    table = pa.table(
        {
            "rid": pa.array([r["review_id"] for r in rows], pa.large_string()),
            "text": pa.array([r["text"] for r in rows], pa.string_view()),
            "label": pa.array([r["label"] for r in rows], pa.string_view()),
        }
    )
    pq.write_table(table, tmp_path / "views.parquet")
    _, _, manifest = _stage(tmp_path, tmp_path / "views.parquet", id_column="rid")
    staged = pq.read_table(tmp_path / "out" / "r" / "work" / "input.parquet")
    assert staged.column("text").to_pylist() == [r["text"] for r in rows]
    assert staged.column("id").to_pylist() == [r["review_id"] for r in rows] and manifest.id_type == "string"


# -- 14. more processes than the machine has --------------------------------------------------------


def test_more_processes_than_cores_or_gpus_are_refused(capsys):
    from scorekeeper.cli import main

    request = ScoreRequest(input_uri="i", model_uri="m", output_uri="o", num_processes=100)
    with pytest.raises(InputError, match=r"num_processes 100 is more than this machine's 2 CPU core\(s\).*--oversubscribe"):
        request.resolved_num_processes(0, cores=2)
    assert request.model_copy(update={"oversubscribe": True}).resolved_num_processes(0, cores=2) == 100
    with pytest.raises(InputError, match=r"num_processes 100 is more than the 8 visible GPU\(s\): every scoring process needs a GPU"):
        request.resolved_num_processes(8, cores=64)
    assert ScoreRequest(input_uri="i", model_uri="m", output_uri="o").resolved_num_processes(0, cores=2) == 1
    # The command line refuses it before it starts anything (no server, no scoring process).
    code = main(["run", "--input-uri", "i.csv", "--model-uri", "m", "--output-uri", "o", "--num-processes", "100000"])
    err = capsys.readouterr().err
    assert code == 2 and "scorekeeper: error: num_processes 100000 is more than" in err and "Prefect server" not in err


# -- 15. everything that can be checked is checked before anything is written -----------------------


def test_max_length_beyond_the_model_is_refused_up_front_and_the_name_stays_usable(tmp_path, models):
    write_rows(tmp_path / "in.csv", make_rows(4))
    params = dict(input_uri=str(tmp_path / "in.csv"), model_uri=models["bert"], output_uri=str(tmp_path / "out"), run_name="r")
    with pytest.raises(ModelError, match="max_length 100000 exceeds the model's maximum of 128 tokens"):
        open_run_and_plan(max_length=100000, **params)
    _assert_nothing_written(tmp_path)
    # An attempt that was planned but committed nothing (refused by its scoring processes, say)
    # does not hold its name: the same name runs again with other settings.
    open_run_and_plan(max_length=64, **params)
    request, context, manifest, job = open_run_and_plan(max_length=32, **params)
    assert not context.resumed and len(job.ranges) == 1
    assert json.loads((tmp_path / "out" / "r" / "request.json").read_text())["max_length"] == 32


# -- 16. resume compares places, not spellings ---------------------------------------------------


def test_resume_compares_uris_normalised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    context = type(
        "C", (), {"run_id": "r", "model_fingerprint": "m", "adapter_fingerprint": None, "head": "single_label", "templates": {}}
    )()

    def record(**uris):
        return request_record(ScoreRequest(**({"model_uri": "models/bert", "output_uri": "runs"} | uris)), context)

    earlier = record(input_uri="./data")
    for same in (str(tmp_path / "data"), "data/", f"file://{tmp_path}/data", "./data/../data"):
        check_resumable(earlier, record(input_uri=same))
    check_resumable(record(input_uri="s3://b/eval/", model_uri="s3a://b/m"), record(input_uri="s3://b/eval", model_uri="s3://b/m/"))
    with pytest.raises(RunConflict, match="input_uri"):
        check_resumable(earlier, record(input_uri="./other"))
