"""The run folder's layout and records, and what each parameter declares it affects."""

from __future__ import annotations

import json
import typing

import pyarrow.parquet as pq
import pytest
from pydantic import Field

from scorekeeper.errors import InputError, RunConflict
from scorekeeper.params import (
    PARAMETER_EFFECTS,
    RESUMABLE_DIFFERENCES,
    SCORING_PARAMETERS,
    STAGING_PARAMETERS,
    Affects,
    ScoreRequest,
    affects,
    parameter_effects,
)
from scorekeeper.request_record import LATER_PARAMETERS, RequestRecord, check_resumable, publish_request_record, read_request_record
from scorekeeper.run_folder import CommitRecord, InputFile, Plan, RunFolder, StagedManifest
from scorekeeper.tasks.read import list_input_files, read_inputs, staging_key
from tests.helpers import make_rows, write_rows

BASE = dict(input_uri="in.csv", model_uri="model", output_uri="out", run_name="r", id_column="review_id")


# -- what each parameter affects -------------------------------------------------------------------


def test_every_parameter_says_what_it_affects():
    assert set(PARAMETER_EFFECTS) == set(ScoreRequest.model_fields)
    assert all(PARAMETER_EFFECTS.values())


def test_an_unclassified_parameter_is_refused_saying_what_to_add():
    class WithNewKnob(ScoreRequest):
        fan_out: int = Field(0, description="a field someone forgot to classify")

    with pytest.raises(TypeError) as refused:
        parameter_effects(WithNewKnob)
    message = str(refused.value)
    assert "WithNewKnob.fan_out does not say what it affects" in message
    assert "json_schema_extra=affects(" in message and "scorekeeper/params.py" in message
    for kind in Affects:
        assert kind.name in message

    class Classified(ScoreRequest):
        fan_out: int = Field(0, json_schema_extra=affects(Affects.NOTHING))

    assert parameter_effects(Classified)["fan_out"] == {Affects.NOTHING}

    class Contradictory(ScoreRequest):
        fan_out: int = Field(0, json_schema_extra=affects(Affects.NOTHING, Affects.PREDICTIONS))

    with pytest.raises(TypeError, match="fan_out says it affects NOTHING and predictions"):
        parameter_effects(Contradictory)


def test_the_scoring_fingerprint_keeps_the_parameters_it_always_had():
    # Adding or removing one changes every earlier run's scoring fingerprint: their commit records
    # would no longer count and a resume of them would fail at the gather.
    assert SCORING_PARAMETERS == {
        "input_uri", "text_column", "text_pair_column", "id_column", "model_uri", "adapter_uri", "merge_adapter", "mode",
        "output_uri", "dtype", "max_length", "rows_per_range", "tokens_per_batch", "max_batch_rows", "null_text",
        "pipeline_stages", "microbatches", "trust_remote_code", "head", "thresholds",
        "long_text", "head_tokens", "chunk_overlap", "chunk_aggregate", "max_chunks", "embedding_rows",
    }  # fmt: skip
    # the ones added later enter the digest only off the value every earlier run had
    earlier = RequestRecord.of(ScoreRequest(**BASE), "r", "m", None)
    for name in ("long_text", "head_tokens", "chunk_overlap", "chunk_aggregate", "max_chunks", "embedding_rows"):
        assert name in SCORING_PARAMETERS and ScoreRequest.model_fields[name].default == LATER_PARAMETERS[name], name
    for changed in (
        {"long_text": "chunk"},
        {"long_text": "head_tail"},
        {"max_chunks": 3},
        {"chunk_overlap": 5},
        {"head_tokens": 64},
        {"embedding_rows": 0},
    ):
        assert earlier.scoring_fingerprint("in") != RequestRecord.of(ScoreRequest(**BASE, **changed), "r", "m", None).scoring_fingerprint(
            "in"
        ), changed
    assert earlier.scoring_fingerprint("in") == RequestRecord.of(
        ScoreRequest(**BASE), "r", "m", None, head="single_label"
    ).scoring_fingerprint("in")
    assert earlier.scoring_fingerprint("in") != RequestRecord.of(
        ScoreRequest(**BASE), "r", "m", None, head="regression"
    ).scoring_fingerprint("in")
    assert {"num_processes", "run_name", "storage_block", "collective_timeout_s"} <= RESUMABLE_DIFFERENCES
    assert {"label_column", "ground_truth_uri", "slice_columns"} <= RESUMABLE_DIFFERENCES & STAGING_PARAMETERS
    assert not RESUMABLE_DIFFERENCES & SCORING_PARAMETERS


def _literals(annotation) -> list:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for a in typing.get_args(annotation) for v in _literals(a)]


def _other_value(name: str, value):
    """A valid value of the parameter other than `value`."""
    annotation = ScoreRequest.model_fields[name].annotation
    others = [v for v in _literals(annotation) if v != value]
    if value in _literals(annotation):
        return others[0] if others else 3  # num_processes: 'auto' or a number
    if value is None:
        if name == "as_of":
            return "2026-12-03"
        return 2 if {int, float} & set(typing.get_args(annotation)) else "other"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        upper = next((m.le for m in ScoreRequest.model_fields[name].metadata if getattr(m, "le", None) is not None), None)
        return value * 2 or 2 if upper is None or value * 2 <= upper else (value + upper) / 2  # drift_min_auc: at most 1
    if isinstance(value, list):
        return value + ["other"]
    if isinstance(value, dict):
        return value | {"accuracy": ">=0.5"}
    return value + "-other"


@pytest.mark.parametrize("name", sorted(ScoreRequest.model_fields))
def test_a_staging_parameter_changes_the_staging_key_and_no_other_does(tmp_path, name):
    write_rows(tmp_path / "in.csv", make_rows(3))
    files = list_input_files(str(tmp_path / "in.csv"))
    request = ScoreRequest(**BASE | {"input_uri": str(tmp_path / "in.csv")})
    changed = ScoreRequest(**request.model_dump() | {name: _other_value(name, getattr(request, name))})
    assert getattr(changed, name) != getattr(request, name)
    assert (staging_key(changed, files) != staging_key(request, files)) == (name in STAGING_PARAMETERS)


def _staged(tmp_path, request: ScoreRequest, folder: str):
    """What the read step stages for a request (or the message it refuses it with)."""
    run = RunFolder.under(str(tmp_path / "runs"), folder)
    try:
        manifest = read_inputs(request, run)
    except (InputError, ValueError) as exc:
        return str(exc)
    ground_truth = pq.read_table(run.join(RunFolder.STAGED_GROUND_TRUTH)) if manifest.ground_truth else None
    staged = pq.ParquetFile(run.join(RunFolder.STAGED_INPUT))
    return manifest.model_dump(exclude={"staging_key"}), staged.read(), staged.metadata.num_row_groups, ground_truth


def test_each_parameter_that_changes_the_staged_input_is_declared_staging(tmp_path):
    rows = [
        r | {"key": f"k{i}", "text2": r["text"][::-1], "label2": r["label"][::-1], "lang": "en" if i % 2 else "de"}
        for i, r in enumerate(make_rows(7))
    ]
    rows[3]["text"] = None
    write_rows(tmp_path / "in.jsonl", rows)
    write_rows(tmp_path / "copy" / "in.jsonl", rows)
    write_rows(tmp_path / "gt.jsonl", [{"review_id": r["review_id"], "label": "positive"} for r in rows])
    base = ScoreRequest(
        **BASE | {"input_uri": str(tmp_path / "in.jsonl"), "output_uri": str(tmp_path / "runs"), "null_text": "empty", "rows_per_range": 3}
    )
    alternatives = {
        "input_uri": str(tmp_path / "copy" / "in.jsonl"), "text_column": "text2", "text_pair_column": "text2", "id_column": "key",
        "label_column": "label2", "ground_truth_uri": str(tmp_path / "gt.jsonl"), "slice_columns": ["lang"], "null_text": "error",
        "head": "multi_label", "label_delimiter": "e",
    }  # fmt: skip
    needs = {"label_delimiter": {"head": "multi_label"}}  # parameters whose effect shows with another one set
    expected = _staged(tmp_path, base, "base")
    assert not isinstance(expected, str), expected
    changes_staging = set()
    for name in ScoreRequest.model_fields:
        start = ScoreRequest(**base.model_dump() | needs.get(name, {}))
        reference = _staged(tmp_path, start, name + "-base") if name in needs else expected
        value = alternatives.get(name, _other_value(name, getattr(start, name)))
        if _staged(tmp_path, ScoreRequest(**start.model_dump() | {name: value}), name) != reference:
            changes_staging.add(name)
    missing = changes_staging - STAGING_PARAMETERS
    assert not missing, f"{sorted(missing)} change what the read step stages: declare they affect STAGING"
    assert changes_staging == STAGING_PARAMETERS


def test_a_changed_staging_parameter_stages_the_input_again(tmp_path):
    write_rows(tmp_path / "in.csv", make_rows(5))
    request = ScoreRequest(**BASE | {"input_uri": str(tmp_path / "in.csv"), "output_uri": str(tmp_path / "out")})
    run = RunFolder.under(request.output_uri, "r")
    first = read_inputs(request, run)
    assert read_inputs(request, run) == first  # reused
    sliced = read_inputs(request.model_copy(update={"slice_columns": ["label"]}), run)
    assert sliced.staging_key != first.staging_key and sliced.slice_columns == ["label"]
    assert "slice_0" in pq.read_schema(run.join(RunFolder.STAGED_INPUT)).names
    assert run.read_manifest() == sliced


# -- the run folder --------------------------------------------------------------------------------


def test_the_run_folder_keeps_the_output_layout(tmp_path):
    run = RunFolder.under(str(tmp_path / "out"), "nightly-01")
    assert run.path == str(tmp_path / "out" / "nightly-01")
    assert (RunFolder.REQUEST, RunFolder.PLAN, RunFolder.PREDICTIONS, RunFolder.REPORT_DIR) == (
        "request.json", "plan.json", "predictions.parquet", "report",
    )  # fmt: skip
    assert [RunFolder.STAGED_INPUT, RunFolder.STAGED_GROUND_TRUTH, RunFolder.STAGED_MANIFEST, RunFolder.JOB, RunFolder.LEASE_DIR] == [
        "work/input.parquet", "work/ground_truth.parquet", "work/staged.json", "work/job.json", "work/lease",
    ]  # fmt: skip
    assert RunFolder.commit_name(12) == "work/commits/range-0000012.json"
    assert RunFolder.shard_name(12, "abc-r0") == "work/shards/range-0000012-abc-r0.parquet"
    assert run.uri_of(RunFolder.JOB) == str(tmp_path / "out" / "nightly-01" / "work" / "job.json")


# Files as the version before the typed records wrote them (json.dumps of plain dicts).
OLD_FILE = {"uri": "/data/in.csv", "size": 120, "format": "csv", "fingerprint": "abc"}
OLD_MANIFEST = {
    "files": [OLD_FILE], "total_rows": 7, "has_label": True, "label_type": "string", "id_type": "string",
    "has_text_pair": False, "null_text_rows": 0, "slice_columns": ["lang"], "staging_key": "k",
    "ground_truth": {"files": [OLD_FILE | {"uri": "/data/gt.csv"}], "id_type": "string"},
}  # fmt: skip
OLD_PLAN = {
    "files": [OLD_FILE], "total_rows": 7, "input_fingerprint": "i", "model_fingerprint": "m", "adapter_fingerprint": None,
    "scoring_fingerprint": "s", "rows_per_range": 4, "ranges": [[0, 4], [4, 7]], "labels": ["a", "b"],
}  # fmt: skip


def _published(tmp_path, obj) -> bytes:
    run = RunFolder.from_uri(str(tmp_path))
    run.publish_json(obj, "x.json")
    return run.read_bytes("x.json")


def test_records_read_old_files_and_write_the_same_bytes(tmp_path):
    run = RunFolder.from_uri(str(tmp_path / "run"))
    run.publish_json(OLD_MANIFEST, RunFolder.STAGED_MANIFEST)
    old_bytes = run.read_bytes(RunFolder.STAGED_MANIFEST)
    manifest = run.read_manifest()
    assert manifest.ground_truth.id_type == "string" and manifest.files == [InputFile(**OLD_FILE)]
    run.publish_manifest(manifest)
    assert run.read_bytes(RunFolder.STAGED_MANIFEST) == old_bytes

    run.publish_json(OLD_PLAN, RunFolder.PLAN)
    old_bytes = run.read_bytes(RunFolder.PLAN)
    assert run.read_plan().ranges == [(0, 4), (4, 7)]
    run.publish_plan(Plan.model_validate(OLD_PLAN))
    assert run.read_bytes(RunFolder.PLAN) == old_bytes

    old_commit = {"range_index": 1, "start": 4, "end": 7, "rows": 3, "row_index_sha256": "h", "shard": "work/shards/s.parquet",
                  "scoring_fingerprint": "s", "tokens": 9, "truncated": 0, "attempt": "a-r0"}  # fmt: skip
    old_bytes = json.dumps(old_commit, sort_keys=True).encode() + b"\n"
    assert CommitRecord.from_bytes(old_bytes).to_bytes() == old_bytes
    assert StagedManifest.model_validate(OLD_MANIFEST).model_dump(mode="json") == OLD_MANIFEST


def test_an_old_request_json_resumes_and_a_changed_setting_is_refused(tmp_path):
    request = ScoreRequest(**BASE)
    run = RunFolder.under(str(tmp_path), "r")
    old = request.public_dict() | {"run_id": "r", "model_fingerprint": "m", "adapter_fingerprint": None}
    run.publish_json(old, RunFolder.REQUEST)  # as the plan step wrote it before the typed record
    earlier = read_request_record(run)
    now = RequestRecord.of(request.model_copy(update={"num_processes": 4, "slice_columns": ["x"]}), "r", "m", None)
    check_resumable(earlier, now)
    assert earlier.scoring_fingerprint("input") == now.scoring_fingerprint("input")
    with pytest.raises(RunConflict, match=r"dtype: 'auto' then, 'float32' now"):
        check_resumable(earlier, RequestRecord.of(request.model_copy(update={"dtype": "float32"}), "r", "m", None))
    with pytest.raises(RunConflict, match="the model folder's content changed"):
        check_resumable(earlier, RequestRecord.of(request, "r", "other", None))
    fresh = RunFolder.under(str(tmp_path), "fresh")
    publish_request_record(fresh, RequestRecord.of(request, "fresh", "m", None))
    assert fresh.read_bytes(RunFolder.REQUEST) == _published(tmp_path, request.public_dict() | {
        "run_id": "fresh", "model_fingerprint": "m", "adapter_fingerprint": None, "templates": {}})  # fmt: skip


def test_the_request_record_holds_no_password_and_resumes_against_its_redacted_form(tmp_path):
    request = ScoreRequest(**BASE | {"input_uri": "s3://key:pa55@bucket/eval/"})
    run = RunFolder.under(str(tmp_path), "r")
    publish_request_record(run, RequestRecord.of(request, "r", "m", None))
    assert b"pa55" not in run.read_bytes(RunFolder.REQUEST)
    earlier = read_request_record(run)
    now = RequestRecord.of(request.model_copy(update={"input_uri": "s3://key:pa55@bucket/eval"}), "r", "m", None)
    check_resumable(earlier, now)
    assert earlier.scoring_fingerprint("i") == now.scoring_fingerprint("i")


def test_an_unreadable_request_json_is_one_clear_refusal(tmp_path):
    run = RunFolder.under(str(tmp_path), "r")
    run.publish_json(ScoreRequest(**BASE).public_dict() | {"run_id": "r", "model_fingerprint": "m"}, RunFolder.REQUEST)
    with pytest.raises(RunConflict, match="request.json this version cannot read.*adapter_fingerprint"):
        read_request_record(run)
