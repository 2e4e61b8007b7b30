"""The process boundary (scorekeeper/boundary.py): the job file and the worker's events, checked
without starting a process. The integration tests (test_replica, test_pipeline, test_faults) run
the same records across real processes."""

from __future__ import annotations

import random
import typing

import pytest

from scorekeeper.boundary import (
    EVENT_PREFIX,
    Event,
    EventKind,
    Failed,
    Finished,
    Heartbeat,
    Job,
    LaunchSettings,
    MalformedEvent,
    ModelLoaded,
    PipelineReport,
    PrecisionCheck,
    PrecisionChecked,
    RangeDone,
    RankEvent,
    ScoringSettings,
    Started,
    event_line,
    parse_event,
)
from scorekeeper.params import SCORING_PARAMETERS, ScoreRequest
from scorekeeper.run_folder import IndexRange, RunFolder, cut_ranges

ENGINE = {
    "device": "cpu",
    "accelerator_path": False,
    "prefetch_thread": False,
    "pinned_memory": False,
    "batch_threads": 2,
    "tokens_per_batch": 2048,
}


def examples(rng: random.Random) -> list[Event]:
    """One event of every kind, with generated values."""
    rank = rng.randrange(8)
    return [
        Started(rank=rank, world=8, device=rng.choice(["cpu", "cuda:3"]), ranges=rng.randrange(100), engine=ENGINE),
        ModelLoaded(rank=rank, seconds=rng.random() * 10),
        Heartbeat(rank=rank),
        RangeDone(
            rank=rank,
            range=rng.randrange(10**6),
            rows=rng.randrange(1, 5000),
            tokens=rng.randrange(10**7),
            padded_tokens=rng.randrange(10**7),
            truncated=rng.randrange(50),
            committed=rng.random() < 0.5,
            elapsed=rng.random(),
        ),
        PipelineReport(
            pipeline=0,
            ranks=[0, 1],
            stages=[[0, 2], [2, 4]],
            microbatches=4,
            schedule="GPipe",
            steps=3,
            short_steps=1,
            dummy_rows=2,
            schedules_built=2,
            stage_busy_s=[0.5, 0.25],
            stage_step_s=[1.0, 1.0],
            bubble_measured=rng.choice([None, 0.375]),
            bubble_theoretical=0.2,
        ),
        PrecisionChecked(
            rank=rank,
            check=PrecisionCheck(
                dtype="bfloat16", rows=rng.randrange(1, 300), max_probability_difference=rng.random() / 100, changed_predictions=0
            ),
        ),
        Finished(rank=rank),
        Failed(rank=rank, message=rng.choice(["max_length 9000 exceeds the model's maximum", 'a "quoted"\nline'])),
    ]


def test_every_event_kind_has_one_record_and_survives_the_line():
    for seed in range(20):
        events = examples(random.Random(seed))
        assert sorted(e.event for e in events) == sorted(EventKind)
        for event in events:
            line = event_line(event)
            assert line.startswith(EVENT_PREFIX) and line.endswith("\n") and line.count("\n") == 1
            assert parse_event(line.rstrip("\n")) == event


def test_the_event_union_names_every_kind_once():
    records = typing.get_args(typing.get_args(Event)[0])
    assert sorted(r.model_fields["event"].default for r in records) == sorted(EventKind)


def test_lines_that_are_not_events():
    assert parse_event("Loading weights: 100%") is None
    assert parse_event("") is None
    for bad in ("not json", '{"event": "range_done", "rank": 0}', '{"event": "no such kind", "rank": 0}', "[1, 2]"):
        with pytest.raises(MalformedEvent):
            parse_event(EVENT_PREFIX + bad)


def test_only_a_process_event_counts_as_a_sign_of_life():
    """The watchdog counts heartbeats by rank: every event but the pipeline's (sent once, for a
    whole pipeline) names the process it comes from."""
    events = examples(random.Random(0))
    assert [type(e).__name__ for e in events if not isinstance(e, RankEvent)] == ["PipelineReport"]


def test_the_worker_sees_only_parameters_in_the_scoring_fingerprint():
    """Everything the worker is handed of the request is fingerprinted: no setting can change a
    prediction without making the committed shards stale."""
    assert set(ScoringSettings.model_fields) <= SCORING_PARAMETERS
    for section in (ScoringSettings, LaunchSettings):
        for name, field in section.model_fields.items():
            assert field.annotation == ScoreRequest.model_fields[name].annotation, (section.__name__, name)


def test_the_sections_are_the_requests_values():
    request = ScoreRequest(
        input_uri="i",
        model_uri="s3://k:secret@b/m",
        output_uri="o",
        mode="pipeline",
        microbatches=3,
        num_processes=2,
        adapter_uri="./adapter",
        tokens_per_batch=512,
        collective_timeout_s=30,
    )
    scoring, launch = ScoringSettings.of(request), LaunchSettings.of(request)
    assert (scoring.mode, scoring.microbatches, scoring.tokens_per_batch, scoring.max_batch_rows) == ("pipeline", 3, 512, 1024)
    assert (launch.model_uri, launch.adapter_uri, launch.num_processes, launch.collective_timeout_s) == (
        "s3://k:secret@b/m",
        "./adapter",
        2,
        30.0,
    )
    assert launch.resolved_num_processes(0, cores=2) == request.resolved_num_processes(0, cores=2) == 2


def test_the_job_file_round_trips_and_holds_no_password():
    request = ScoreRequest(input_uri="i", model_uri="s3://key:pa55@bucket/model", output_uri="o")
    job = Job(
        scoring=ScoringSettings.of(request),
        launch=LaunchSettings.of(request),
        run_uri="s3://key:pa55@bucket/runs/r",
        model_path="/cache/model",
        adapter_path=None,
        total_rows=23,
        ranges=cut_ranges(23, 5)[1:],
        scoring_fingerprint="f" * 64,
        attempt="abc",
    )
    text = job.to_json()
    assert "pa55" not in text
    back = Job.from_json(text)
    assert back.ranges == [IndexRange(1, 5, 10), IndexRange(2, 10, 15), IndexRange(3, 15, 20), IndexRange(4, 20, 23)]
    assert back.scoring == job.scoring and back.launch.model_uri == "s3://***@bucket/model"
    assert back.model_copy(update={"run_uri": job.run_uri, "launch": job.launch}) == job
    assert Job.from_json(back.to_json()) == back  # redacting twice changes nothing
    assert RunFolder.JOB.endswith("job.json")
