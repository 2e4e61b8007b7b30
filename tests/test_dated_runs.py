"""Dated runs (scorekeeper/uri_template.py, docs/inputs.md "Dated runs"): the template grammar, its
filling from as_of / the scheduled time / now, what request.json records, and if_empty.

The grammar is tested as properties: every template the grammar generates parses and fills to what
an independent spelling of each directive gives; a filled value fills to itself; any other use of a
brace is refused with a TemplateError (one line), never another exception. The runs go through the
flow (tests/helpers.run_flow) and the CLI; the deployments' dated nights are in test_deployments.py.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from scorekeeper import uri_template
from scorekeeper.cli import main
from scorekeeper.errors import NoInput
from scorekeeper.params import ScoreRequest
from scorekeeper.staging.presence import no_data, no_data_tonight
from scorekeeper.uri_template import TemplateError, fill, parse, parse_as_of
from tests.helpers import make_rows, run_flow, write_rows

# -- the grammar, as properties ------------------------------------------------------------------

# An independent spelling of the directives the generator uses (not strftime).
SPELLED = {
    "Y": lambda t: f"{t.year:04d}",
    "m": lambda t: f"{t.month:02d}",
    "d": lambda t: f"{t.day:02d}",
    "H": lambda t: f"{t.hour:02d}",
    "M": lambda t: f"{t.minute:02d}",
    "S": lambda t: f"{t.second:02d}",
    "j": lambda t: f"{(t.date() - t.date().replace(month=1, day=1)).days + 1:03d}",
    "%": lambda t: "%",
}
LITERAL = st.text(st.characters(blacklist_characters="{}%", blacklist_categories=("Cs", "Cc")), max_size=6)
MOMENTS = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC))


@st.composite
def placeholders(draw):
    """(placeholder text, its filling as a function of the moment), from the grammar."""
    amount = draw(st.integers(-400, 400))
    unit = draw(st.sampled_from("dh"))
    offset_text = "" if amount == 0 and draw(st.booleans()) else f"{'+' if amount >= 0 else '-'}{abs(amount)}{unit}"
    shift = timedelta(days=amount) if unit == "d" else timedelta(hours=amount)
    if not offset_text:
        shift = timedelta(0)
    if draw(st.booleans()):
        return "{date" + offset_text + "}", lambda t: (t + shift).date().isoformat()
    pieces = draw(st.lists(st.one_of(LITERAL, st.sampled_from(sorted(SPELLED)).map(lambda d: "%" + d)), min_size=1, max_size=5))
    form = "".join(pieces)
    if not form:
        form = "%Y"
        pieces = ["%Y"]

    def spell(t, pieces=pieces, shift=shift):
        moved = t + shift
        return "".join(SPELLED[p[1]](moved) if p.startswith("%") and len(p) == 2 and p[1] in SPELLED else p for p in pieces)

    return "{scheduled" + offset_text + ":" + form + "}", spell


@st.composite
def templates(draw):
    parts = draw(st.lists(st.one_of(LITERAL.map(lambda s: (s, lambda t, s=s: s)), placeholders()), max_size=5))
    return "".join(p[0] for p in parts), lambda t: "".join(p[1](t) for p in parts)


@settings(max_examples=300, deadline=None)
@given(templates(), MOMENTS)
def test_every_template_of_the_grammar_fills_as_its_directives_spell(template, when):
    text, expected = template
    assert fill(text, when) == expected(when)


@settings(max_examples=200, deadline=None)
@given(templates(), MOMENTS, MOMENTS)
def test_a_filled_value_is_never_filled_again_differently(template, first, second):
    filled = fill(template[0], first)
    assert not uri_template.is_template(filled)
    assert fill(filled, second) == filled


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}%:+-dh1 abcdatescheduledYm/\x00")), max_size=24), MOMENTS)
def test_any_text_either_fills_or_is_refused_in_one_line(text, when):
    try:
        filled = fill(text, when)
    except TemplateError as exc:
        assert "\n" not in str(exc) and repr(text) in str(exc)
    else:
        assert "{" not in filled and "}" not in filled
        assert filled == text or "{" in text


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("in/{day}/", "unknown placeholder {day}"),
        ("in/{}/", "unknown placeholder {}"),
        ("in/{date-1}/", "malformed placeholder {date-1}"),
        ("in/{date - 1d}/", "malformed placeholder {date - 1d}"),
        ("in/{date+99999d}/", "malformed placeholder"),
        ("in/{date:%Y}/", "{date} is always YYYY-MM-DD"),
        ("in/{scheduled}/", "{scheduled} needs a format"),
        ("in/{scheduled:%a}/", "%a is not a format directive here"),
        ("in/{scheduled:%-d}/", "%- is not a format directive here"),
        ("in/{scheduled:%Y%}/", "a '%' at the end is not a format directive"),
        ("in/{scheduled:%Y\x00}/", "a control character in the format"),
        ("in/{date/", "a '{' that does not open or close a placeholder"),
        ("in/date}/", "a '}' that does not open or close a placeholder"),
        ("in/{{date}}/", "a '{' that does not open or close a placeholder"),
    ],
)
def test_a_template_outside_the_grammar_is_refused_naming_it(template, said):
    with pytest.raises(TemplateError) as refused:
        parse(template)
    assert said in str(refused.value) and repr(template) in str(refused.value)


def test_the_examples_of_the_docs_fill_as_they_say():
    night = datetime(2026, 12, 3, 2, 30, tzinfo=UTC)
    assert fill("s3://bucket/incoming/{date}/", night) == "s3://bucket/incoming/2026-12-03/"
    assert fill("s3://bucket/incoming/{date-1d}/", night) == "s3://bucket/incoming/2026-12-02/"
    assert fill("s3://bucket/incoming/{scheduled:%Y/%m/%d}/", night) == "s3://bucket/incoming/2026/12/03/"
    assert fill("hourly/{scheduled-3h:%Y%m%dT%H}.parquet", night) == "hourly/20261202T23.parquet"
    assert fill("monitor-{date-1d}", datetime(2027, 1, 1, tzinfo=UTC)) == "monitor-2026-12-31"


# -- the moment: as_of, the scheduled time, now ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12-01T02:30", datetime(2026, 12, 1, 2, 30, tzinfo=UTC)),
        ("2026-12-01T02:30:00Z", datetime(2026, 12, 1, 2, 30, tzinfo=UTC)),
        ("2026-12-01T03:30:00+01:00", datetime(2026, 12, 1, 2, 30, tzinfo=UTC)),
        (" 2026-12-01T02:30:00.999+00:00 ", datetime(2026, 12, 1, 2, 30, tzinfo=UTC)),
    ],
)
def test_as_of_is_a_date_or_an_iso_time_taken_in_utc(text, moment):
    assert parse_as_of(text) == moment
    assert ScoreRequest(input_uri="i", model_uri="m", output_uri="o", as_of=text).as_of == moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("text", ["2026-13-01", "yesterday", "2026-12-01T25:00", "12/01/2026", "20261201", ""])
def test_an_as_of_that_is_no_date_is_refused(text):
    with pytest.raises(ValidationError, match="is neither a date"):
        ScoreRequest(input_uri="i", model_uri="m", output_uri="o", as_of=text)


def test_the_moment_is_as_of_else_the_scheduled_time_else_now():
    dated = ScoreRequest(input_uri="in/{date}/", model_uri="m", output_uri="o", run_name="n-{date}")
    scheduled = datetime(2026, 12, 3, 2, 30, 7, 123456, tzinfo=UTC)
    assert dated.fill_moment(scheduled) == scheduled.replace(microsecond=0)
    assert dated.model_copy(update={"as_of": "2026-11-30T00:00:00Z"}).fill_moment(scheduled) == datetime(2026, 11, 30, tzinfo=UTC)
    before = datetime.now(UTC).replace(microsecond=0)
    assert before <= dated.fill_moment() <= datetime.now(UTC)
    filled = dated.filled(scheduled)
    assert (filled.input_uri, filled.run_name, filled.as_of) == ("in/2026-12-03/", "n-2026-12-03", "2026-12-03T02:30:07Z")
    assert dated.dated_templates() == {"input_uri": "in/{date}/", "run_name": "n-{date}"} and filled.dated_templates() == {}
    assert filled.filled(datetime(2030, 1, 1, tzinfo=UTC)).input_uri == "in/2026-12-03/"
    every = ScoreRequest(
        input_uri="s3://b/in/{scheduled:%Y/%m/%d}/*.parquet", ground_truth_uri="s3://b/labels/{date-2d}.csv", id_column="id",
        model_uri="m/{date}", output_uri="s3://b/runs/{scheduled:%Y}/", run_name="r{scheduled-3h:%Y%m%dT%H}",
    )  # fmt: skip
    assert every.filled(scheduled).public_dict() | {"as_of": None} == every.public_dict() | {
        "input_uri": "s3://b/in/2026/12/03/*.parquet",
        "ground_truth_uri": "s3://b/labels/2026-12-01.csv",
        "output_uri": "s3://b/runs/2026/",
        "run_name": "r20261202T23",
    }  # fmt: skip  (model_uri is no template field: its braces are its own)


def test_a_run_name_template_must_make_a_run_name_on_every_night():
    assert ScoreRequest(input_uri="i", model_uri="m", output_uri="o", run_name="nightly-{scheduled:%Y%m%d}").run_name
    with pytest.raises(ValidationError, match=r"run_name 'n-\{scheduled:%Y/%m\}' \(filled: 'n-2001/02'\) must be"):
        ScoreRequest(input_uri="i", model_uri="m", output_uri="o", run_name="n-{scheduled:%Y/%m}")
    with pytest.raises(ValidationError, match="unknown placeholder"):
        ScoreRequest(input_uri="i", model_uri="m", output_uri="o", run_name="n-{night}")


# -- the CLI: refusals and a night without data, before anything starts ----------------------------

BASE = ["run", "--model-uri", "model", "--id-column", "review_id"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--input-uri", "in/{day}/"], "--input-uri: 'in/{day}/': unknown placeholder {day}"),
        (["--input-uri", "in/{date}/", "--ground-truth-uri", "gt/{date:%Y}/"], "--ground-truth-uri: 'gt/{date:%Y}/'"),
        (["--input-uri", "in/", "--output-uri", "runs/{scheduled}/"], "--output-uri: 'runs/{scheduled}/': {scheduled} needs a format"),
        (["--input-uri", "in/{date}/", "--as-of", "2026-02-30"], "--as-of: '2026-02-30' is neither a date"),
        (["--input-uri", "in/{date}/", "--if-empty", "ignore"], "--if-empty: Input should be 'fail' or 'skip'"),
    ],
)
def test_a_bad_template_or_moment_is_one_line_and_exit_2(args, said, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = [] if "--output-uri" in args else ["--output-uri", "runs"]
    assert main(BASE + output + args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scorekeeper: error: invalid parameters: ") and said in err, err
    assert list(tmp_path.iterdir()) == []


def _night_folders(root, nights: dict[str, int]):
    """incoming/{night}/reviews.csv with the given number of rows per night (0: a header only)."""
    for night, rows in nights.items():
        folder = root / "incoming" / night
        folder.mkdir(parents=True)
        if rows:
            write_rows(folder / "reviews.csv", make_rows(rows, seed=len(night) + rows))
        else:
            (folder / "reviews.csv").write_text("review_id,text,label\n")


def test_no_data_is_a_missing_or_empty_folder_only_hidden_files_or_files_without_rows(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "_SUCCESS").write_text("")
    (tmp_path / "rowless").mkdir()
    (tmp_path / "rowless" / "a.csv").write_text("id,text\n")
    (tmp_path / "rowless" / "b.jsonl").write_text("")
    pq.write_table(pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.string())}), tmp_path / "rowless" / "c.parquet")
    (tmp_path / "late").mkdir()
    (tmp_path / "late" / "a.csv").write_text("id,text\n")
    pq.write_table(pa.table({"id": [1], "text": ["fine"]}), tmp_path / "late" / "b.parquet")
    said = {name: str(no_data(str(tmp_path / name))) for name in ("missing", "empty", "hidden", "rowless")}
    assert said["missing"] == f"input not found: {tmp_path / 'missing'}"
    assert said["empty"] == f"input not found: the folder {tmp_path / 'empty'} holds no files"
    assert said["hidden"].startswith(f"input not found: {tmp_path / 'hidden'} holds only hidden files")
    assert said["rowless"] == f"no rows in the input {tmp_path / 'rowless'} (3 file(s), none holds a row)"
    assert no_data(str(tmp_path / "late")) is None and no_data(str(tmp_path / "late" / "*.parquet")) is None
    assert str(no_data(str(tmp_path / "late" / "*.json"))).startswith("input not found: no file matches")
    with pytest.raises(NoInput, match=r"holds no files \(if_empty skip ends a night without data without failing\)$"):
        no_data_tonight(str(tmp_path / "empty"), "fail", dated=True)
    with pytest.raises(NoInput, match=r"holds no files$"):
        no_data_tonight(str(tmp_path / "empty"), "fail", dated=False)
    assert no_data_tonight(str(tmp_path / "empty"), "skip", dated=False) == (
        f"no data tonight: input not found: the folder {tmp_path / 'empty'} holds no files; nothing was scored or written (if_empty skip)"
    )


@pytest.mark.parametrize("night", ["2026-12-02", "2026-12-03"])  # a missing folder; a folder of a header only
def test_the_cli_skips_a_night_without_data_in_one_line_writing_nothing(night, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _night_folders(tmp_path, {"2026-12-01": 3, "2026-12-03": 0})
    args = ["--input-uri", "incoming/{date-1d}/", "--output-uri", "runs", "--run-name", "monitor-{date-1d}"]
    as_of = (datetime.fromisoformat(night) + timedelta(days=1)).date().isoformat()
    started = time.monotonic()
    assert main(BASE + args + ["--as-of", as_of, "--if-empty", "skip"]) == 0
    assert time.monotonic() - started < 3  # no Prefect server, no scoring process
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith("scorekeeper: no data tonight: ") and f"incoming/{night}" in out, out
    assert out.endswith("nothing was scored or written (if_empty skip)\n") and err == ""
    assert not (tmp_path / "runs").exists()

    assert main(BASE + args + ["--as-of", as_of]) == 2  # if_empty fail, the default
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"incoming/{night}" in err and "if_empty skip ends a night without data" in err, err
    assert not (tmp_path / "runs").exists()


# -- runs: request.json, resume and the next night -------------------------------------------------


@pytest.mark.integration
def test_dated_runs_fill_record_resume_and_keep_each_night_apart(models, tmp_path, prefect_api):
    _night_folders(tmp_path, {"2026-11-30": 5, "2026-12-01": 7})
    params = dict(
        input_uri=str(tmp_path / "incoming" / "{date-1d}"),
        output_uri=str(tmp_path / "runs"),
        run_name="nightly-{date-1d}",
        model_uri=models["bert"],
        id_column="review_id",
        rows_per_range=2,
    )
    first = run_flow(**params, as_of="2026-12-01")
    assert first.returned["run_id"] == "nightly-2026-11-30" and first.metrics["rows"] == 5
    record = json.loads((tmp_path / "runs" / "nightly-2026-11-30" / "request.json").read_text())
    assert record["input_uri"] == str(tmp_path / "incoming" / "2026-11-30") and record["run_name"] == "nightly-2026-11-30"
    assert record["as_of"] == "2026-12-01T00:00:00Z"
    assert record["templates"] == {"input_uri": params["input_uri"], "run_name": "nightly-{date-1d}"}

    again = run_flow(**params, as_of="2026-12-01T23:59:59Z")  # the same night later on: it resumes, scoring nothing
    assert again.returned["run_id"] == "nightly-2026-11-30" and again.returned["throughput"]["rows_scored"] == 0
    assert again.predictions.equals(first.predictions)

    # The next night, against the last: `previous` finds it across nights (another folder, other files).
    second = run_flow(**params, as_of="2026-12-02", drift_reference="previous", compare_to="previous")
    assert second.returned["run_id"] == "nightly-2026-12-01" and second.metrics["rows"] == 7
    assert second.metrics["drift"]["reference"] == "nightly-2026-11-30"
    assert second.metrics["comparison"]["run"] == "nightly-2026-11-30" and second.metrics["comparison"]["matched_on"] == "id"
    plan = json.loads((tmp_path / "runs" / "nightly-2026-12-01" / "plan.json").read_text())
    assert plan["input_template"] == params["input_uri"] and plan["files"][0]["uri"].endswith("2026-12-01/reviews.csv")
    assert [h["run_id"] for h in second.metrics["history"]] == ["nightly-2026-11-30", "nightly-2026-12-01"]


@pytest.mark.integration
def test_the_flow_itself_skips_a_night_without_data_or_refuses_it_naming_the_filled_folder(models, tmp_path, prefect_api):
    """What a deployment's flow run does (the CLI checks first, but not where only a storage block
    can list the input): skip returns the 'no data tonight' result before the lease, fail refuses."""
    from scorekeeper.flows.score import score_dataset

    params = dict(
        input_uri=str(tmp_path / "incoming" / "{date-1d}"),
        output_uri=str(tmp_path / "runs"),
        run_name="monitor-{date-1d}",
        model_uri=models["bert"],
        as_of="2026-12-03T02:30:00Z",
    )
    returned = score_dataset(**params, if_empty="skip")
    assert returned == {
        "skipped": f"no data tonight: input not found: {tmp_path / 'incoming' / '2026-12-02'}; nothing was scored or written (if_empty skip)",
        "input_uri": str(tmp_path / "incoming" / "2026-12-02"),
        "as_of": "2026-12-03T02:30:00Z",
    }
    with pytest.raises(NoInput, match=r"input not found: .*/incoming/2026-12-02 \(if_empty skip ends a night"):
        score_dataset(**params)
    assert not (tmp_path / "runs").exists()


@pytest.mark.integration
def test_the_cli_fills_with_now_and_hands_its_flow_run_that_moment(models, tmp_path):
    """`scorekeeper run` without --as-of: the CLI fills the templates with now (UTC), checks the
    filled folder, and gives its flow run that moment, so both read the same night (request.json)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests import prefect_session

    today = datetime.now(UTC).date()
    _night_folders(tmp_path, {str(today - timedelta(days=1)): 4, str(today): 4})  # the date may turn during the run
    args = ["--input-uri", "incoming/{date-1d}/", "--output-uri", "runs", "--run-name", "nightly-{date-1d}"]
    env = prefect_session.cli_environment({**os.environ, "PREFECT_HOME": str(tmp_path / ".prefect")})
    done = subprocess.run(
        [str(Path(sys.executable).with_name("scorekeeper")), *BASE, "--model-uri", models["bert"], *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    record = json.loads((run / "request.json").read_text())
    moment = datetime.fromisoformat(record["as_of"])
    night = str((moment - timedelta(days=1)).date())
    assert record["as_of"].endswith("Z") and today <= moment.date() <= datetime.now(UTC).date()
    assert run.name == record["run_name"] == f"nightly-{night}" and "scored 4 rows" in done.stdout
    assert record["input_uri"] == f"incoming/{night}/" and record["templates"]["input_uri"] == "incoming/{date-1d}/"
