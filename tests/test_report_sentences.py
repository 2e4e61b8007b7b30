"""What the report's sentences state is what metrics.json holds and what the rows are, over generated
runs (tests/generated_runs.py) of every kind of head and long-text mode: each number report.html
marks equals metrics.json at its path, and the length sentence of report.md and report.html, read
as a reader reads it, says of the rows and tokens what they are, recomputed from the rows' lengths."""

from __future__ import annotations

import html as html_lib
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorekeeper.head_kind import HeadKind
from tests import generated_runs as gen
from tests.report_fixture import check_marked_numbers

NUMBER = r"([\d,]+)"
ROWS = re.compile(
    rf"{NUMBER} (?:of the {NUMBER} rows scored |rows )are longer than the window of {NUMBER} content tokens \(max length {NUMBER}\)"
)
RUN_TOKENS = re.compile(
    rf"The run's {NUMBER} content tokens: {NUMBER} fed to the model \(an overlap counted each time\), {NUMBER} never seen by it"
)
THEIR_TOKENS = re.compile(rf"{NUMBER} of their {NUMBER} content tokens were scored, {NUMBER} never seen by the model")
CHUNKS = re.compile(rf"{NUMBER} windows scored, {NUMBER} rows capped at max_chunks")


def number(text: str) -> int:
    return int(text.replace(",", ""))


def text_of(page: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page))


@settings(deadline=None, derandomize=True, database=None, max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from([HeadKind.SINGLE_LABEL, HeadKind.MULTI_LABEL, HeadKind.REGRESSION]),
    st.integers(0, 1000),
    st.sampled_from(["truncate", "head_tail", "chunk"]),
    st.integers(12, 60),
    st.integers(0, 8),
    st.integers(1, 6),
)
def test_the_length_sentence_states_what_the_rows_and_metrics_json_hold(
    tmp_path_factory, head, seed, mode, max_length, overlap, max_chunks
):
    root = tmp_path_factory.mktemp("run")
    spec = gen.Spec(rows=110, seed=seed, shift=0.3)
    gen.write(root / "night", head, spec)
    counts = gen.long_text_counts(root / "night", max_length, mode, overlap, max_chunks)
    document = gen.evaluate(root, "night", head, max_length=max_length, long_text=counts)
    markdown, html = gen.render(document, "night")
    metrics = document.as_dict()
    assert check_marked_numbers(html, metrics) > 0

    window = max_length - gen.SPECIALS
    lengths = [int(x) for x in gen.lengths(spec)]
    long_rows = [x for x in lengths if x > window]
    for page in (markdown, text_of(html)):
        section = page[page.index("What the length costs") :]
        rows = ROWS.search(section)
        assert rows is not None, section[:600]
        over, of_rows, shown_window, shown_max = rows.groups()
        assert number(over) == len(long_rows) == metrics["scoring"]["long_text"]["rows_over_length"]
        assert of_rows is None or number(of_rows) == len(lengths) == metrics["scored"]
        assert (number(shown_window), number(shown_max)) == (window, max_length)
        # the token counts: the run's (every row's), or, said of "their" tokens, the long rows' own
        their = THEIR_TOKENS.search(section)
        if their is not None:
            assert number(their.group(2)) == sum(long_rows), "the long rows' content tokens"
            assert number(their.group(1)) <= number(their.group(2)) + (len(long_rows) * window if mode == "chunk" else 0)
        whole = RUN_TOKENS.search(section)
        assert whole is not None or their is not None, section[:600]
        if whole is not None:
            content, fed, dropped = (number(g) for g in whole.groups())
            assert content == sum(lengths) == metrics["scoring"]["long_text"]["tokens_content"]
            assert (fed, dropped) == (counts.tokens_scored, counts.tokens_dropped)
            assert (fed, dropped) == (metrics["scoring"]["long_text"]["tokens_scored"], metrics["scoring"]["long_text"]["tokens_dropped"])
        chunks = CHUNKS.search(section)
        assert (chunks is not None) == (mode == "chunk")
        if chunks is not None:
            assert (number(chunks.group(1)), number(chunks.group(2))) == (counts.chunks, counts.rows_capped)


AGAINST = r"against run (\S+) \(([\d,]+) rows; this run ([\d,]+)\)"


@settings(deadline=None, derandomize=True, database=None, max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from([HeadKind.SINGLE_LABEL, HeadKind.MULTI_LABEL, HeadKind.REGRESSION]),
    st.integers(0, 1000),
    st.sampled_from([60, 120]),
    st.sampled_from([0.0, 0.7]),
)
def test_the_drift_and_estimate_sentences_state_what_metrics_json_holds(tmp_path_factory, head, seed, reference_rows, shift):
    """The drift part's first sentence (report.md, report.html) states the rows of both runs, and the
    alarm as metrics.json has it: not judged exactly when `alarm` is null, else the count of drifted
    signals of all; the estimate's caveat names exactly the drifted input signals."""
    from scorekeeper.evaluation.drift import is_input_signal

    root = tmp_path_factory.mktemp("drift")
    gen.write(root / "reference", head, gen.Spec(rows=reference_rows, seed=seed, fingerprint="reference"))
    gen.publish(root, "reference", gen.evaluate(root, "reference", head))
    gen.write(root / "night", head, gen.Spec(rows=110, seed=seed + 1, shift=shift, labelled=False))
    document = gen.evaluate(root, "night", head, reference="reference")
    markdown, html = gen.render(document, "night")
    drift = document.as_dict()["drift"]
    assert check_marked_numbers(html, document.as_dict()) > 0
    for page in (markdown.replace("\\", ""), text_of(html)):
        judged = re.search(rf"Drift alarm: {NUMBER} of {NUMBER} signals moved {AGAINST}", page)
        quiet = re.search(rf"No drift {AGAINST}", page)
        unjudged = re.search(rf"Drift not judged {AGAINST}", page)
        assert [judged is not None, quiet is not None, unjudged is not None].count(True) == 1, page[:800]
        if unjudged is not None:
            assert drift["alarm"] is None and drift["drifted_signals"] is None and reference_rows < 100
            name, ref_rows, rows = unjudged.groups()
        elif judged is not None:
            count, of, name, ref_rows, rows = judged.groups()
            assert drift["alarm"] is True and number(count) == drift["drifted_signals"] == len(drift["drifted"])
            assert number(of) == len(drift["signals"])
        else:
            name, ref_rows, rows = quiet.groups()
            assert drift["alarm"] is False and drift["drifted_signals"] == 0
        assert (name, number(ref_rows), number(rows)) == ("reference", drift["rows"]["reference"], drift["rows"]["current"])
        assert (number(ref_rows), number(rows)) == (reference_rows, 110)
        moved = [s for s in drift["drifted"] if is_input_signal(s)]
        caveat = re.search(r"The estimate's assumption is in doubt:[*\s]*the inputs moved.*?\(([^)]*) drifted\)", page)
        assert (caveat is not None) == bool(moved)
        if caveat is not None:
            assert caveat.group(1).split(", ") == moved
