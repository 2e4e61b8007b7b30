"""`scorekeeper run ...`: the flow on the command line (docs/contracts.md, section 4).

Every ScoreRequest field is an option (--snake-case with dashes), generated from the model so the
CLI, the Prefect form and the worker can never disagree. The options are parsed once: the CLI
builds the ScoreRequest and hands the flow its JSON-mode dump (`parse_request`). A problem the user
can fix prints one line on stderr and exits non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from scorekeeper.evaluation.matching import why_nothing_evaluated
from scorekeeper.numbers import readable
from scorekeeper.params import ScoreRequest

NONE_WORDS = {"none", "null"}


def _option_type(annotation: Any):
    """An argparse converter for a field: ints, floats, 'auto', 'none' for optional fields."""
    args = set(typing.get_args(annotation)) or {annotation}
    optional = type(None) in args

    def convert(text: str):
        if optional and text.strip().lower() in NONE_WORDS:
            return None
        if int in args:
            try:
                return int(text)
            except ValueError:
                pass
        if float in args:
            try:
                return float(text)
            except ValueError:
                pass
        return text

    return convert


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scorekeeper", description="Exact offline scoring and evaluation of text classifiers.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="score a dataset and evaluate it (runs the Prefect flow locally)")
    for name, field in ScoreRequest.model_fields.items():
        flag = "--" + name.replace("_", "-")
        help_text = (field.description or "").replace("%", "%%")  # argparse formats help with %
        if not field.is_required():
            help_text += f" (default: {field.get_default(call_default_factory=True)!r})"
        if field.annotation is bool:
            run.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        elif typing.get_origin(field.annotation) is dict:
            run.add_argument(
                flag,
                action="append",
                default=argparse.SUPPRESS,
                metavar="SPEC",
                help=help_text + "; here: --gates 'accuracy>=0.9' (quoted, repeated) or a JSON object",
            )
        elif typing.get_origin(field.annotation) is list:
            # extend, not store: a repeated option adds to the list instead of replacing it
            run.add_argument(
                flag,
                nargs="+",
                action="extend",
                default=argparse.SUPPRESS,
                metavar="COLUMN",
                help=help_text + "; comma-separated or repeated",
            )
        else:
            run.add_argument(
                flag, type=_option_type(field.annotation), default=argparse.SUPPRESS, required=field.is_required(), help=help_text
            )
    demo = commands.add_parser("demo", help="build the demo (generated reviews, all-MiniLM-L6-v2 + a LoRA adapter) into a folder")
    demo.add_argument("folder", nargs="?", default="demo")
    demo.add_argument("--seed", type=int, default=0, help="the data's and the training's seed (default: 0)")
    demo.add_argument("--force", action="store_true", help="rebuild even if a complete demo of the same recipe exists")
    demo.add_argument("--threads", type=int, default=None, help="torch threads while training (default: one per idle core, at least one)")
    return parser


def _explain(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(x) for x in item["loc"]) or "parameters"
        parts.append(
            f"--{where.replace('_', '-')}: {item['msg'].removeprefix('Value error, ')}"
            if item["loc"]
            else item["msg"].removeprefix("Value error, ")
        )
    return "invalid parameters: " + "; ".join(parts)


def request_options(options: dict[str, Any]) -> dict[str, Any]:
    """The parsed options as ScoreRequest's fields: comma-separated lists split, gates parsed."""
    options = dict(options)
    for name in ("slice_columns", "label_columns"):
        if name in options:
            options[name] = [c for value in options[name] for c in value.split(",") if c]
    if "gates" in options:
        from scorekeeper.gates import gates_from_options

        options["gates"] = gates_from_options(options["gates"])
    return options


def parse_request(options: dict[str, Any]) -> tuple[ScoreRequest, dict[str, Any]]:
    """The parsed options as the validated request, and the flow's parameters: the request's
    JSON-mode dump, so the flow run receives exactly the values every validator produced (a JSON
    text of --thresholds arrives as the object, a comma list as the list), never the CLI's text."""
    request = ScoreRequest(**request_options(options))
    return request, request.model_dump(mode="json")


def _run(options: dict[str, Any]) -> int:
    from scorekeeper.errors import Interrupted, ScorekeeperError

    try:
        request, parameters = parse_request(options)
        # Dated templates filled here, once (as_of, or now): the flow run is handed the same moment,
        # so a run started a second before midnight does not read one night and name another.
        when = request.fill_moment()
        dated = bool(request.dated_templates())
        request = request.filled(when)
        parameters["as_of"] = request.as_of
        from scorekeeper.launch import ScoringProcesses, offering, visible_gpus

        # Fanned out, each group's machine resolves its own process count (its GPUs), not this one.
        processes = request.resolved_num_processes(visible_gpus()) if request.fan_out <= 1 else 0
    except ValidationError as exc:
        return _fail(_explain(exc), 2)
    except ScorekeeperError as exc:
        return _fail(str(exc), exc.exit_code)
    except ValueError as exc:
        return _fail(str(exc), 2)

    if request.fan_out > 1 and not _api_url_configured():
        from scorekeeper.tasks.fan_out import needs_orchestration

        return _fail(needs_orchestration(request), 2)
    from scorekeeper.precheck import prechecked

    code = _prechecks(request, dated)
    if code is not None:
        return code

    # Ctrl-C (SIGINT to the whole foreground process group), SIGTERM and SIGHUP stop the run the
    # same way: the first one raises KeyboardInterrupt here, the flow stops its scoring processes
    # and says how far it got; later ones are ignored so that the clean-up runs to its end.
    # Prefect's temporary server runs in a session of its own, so the terminal's SIGINT does not
    # stop it before this process is done with it (it goes last, below).
    _interrupt_on_signals()
    server = ahead = None
    try:
        # Start-up work that does not need Prefect goes first, so that it overlaps: Prefect's
        # temporary server (unless an API URL is set) and the scoring processes' imports run while
        # this process imports Prefect and the flow. A storage block's credentials are known only
        # inside the flow, so with a block the flow starts the scoring processes itself. The CLI
        # owns the processes it starts: it offers them to the flow and stops what still runs of them.
        server = None if os.environ.get("PREFECT_API_URL") else _start_server()
        if request.storage_block is None and request.fan_out <= 1:  # fanned out, the groups' machines score
            ahead = ScoringProcesses(processes, request.collective_timeout_s).start()
        from scorekeeper.flows.score import score_dataset
        from scorekeeper.progress_bar import progress_display
        from scorekeeper.redact import install_log_redaction
        from scorekeeper.tasks.credentials import hand_over_uris, handed_uris

        _hide_known_tracebacks()
        install_log_redaction()
        # Credentials in a URI never become a flow-run parameter: the flow gets them out of band.
        parameters, handed = hand_over_uris(parameters)
        with _api(server), progress_display(), offering(ahead), handed_uris(handed), prechecked():
            result = score_dataset(**parameters)
    except Interrupted as exc:
        return _interrupted(str(exc))
    except ScorekeeperError as exc:
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:  # before the flow's body ran, or after it
        return _interrupted(_interrupted_outside_the_flow(request))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if ahead is not None:
            ahead.stop()
        if server is not None:
            server.stop()
    if not isinstance(result, dict) or "skipped" in result:  # no data found by the flow (a storage block's input)
        print(f"scorekeeper: {result['skipped'] if isinstance(result, dict) else result}")
        return 0
    print(summary_line(result))
    return 0


def _prechecks(request: ScoreRequest, dated: bool) -> int | None:
    """What is refused before anything starts (the model's window, the input), or a night without
    data (if_empty): the exit code to end with, None to go on."""
    from scorekeeper.errors import ScorekeeperError
    from scorekeeper.precheck import no_data_tonight, precheck, precheck_model

    try:
        precheck_model(request)  # the window's refusals (head_tokens, chunk_overlap, max on a single-label head)
        skipped = no_data_tonight(request, dated)  # if_empty: a night without data, before anything starts
        if skipped is not None:
            print(f"scorekeeper: {skipped}")
            return 0
        precheck(request)  # the input's schema, ids and encodings, before anything starts
    except ScorekeeperError as exc:
        return _fail(str(exc), exc.exit_code)
    return None


def _api_url_configured() -> bool:
    """A Prefect server to use (environment, profile or prefect.toml), not a temporary one."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)


def summary_line(result: dict) -> str:
    """The run's last line: rows, how many were evaluated (and matched), the headline metrics."""
    metrics = result["metrics"]
    rows = result["rows"]
    scored = (result.get("throughput") or {}).get("rows_scored")
    if isinstance(scored, int) and scored < rows:  # a resume: the rest was committed by an earlier attempt
        line = f"scorekeeper: run {result['run_id']} scored {scored} rows and reused {rows - scored} committed earlier ({rows} rows)"
    else:
        line = f"scorekeeper: run {result['run_id']} scored {rows} rows"
    if metrics.get("scoring_only"):
        line += "; scoring only"
    else:
        line += f"; evaluated {metrics.get('evaluated', 0)} of {result['rows']}"
        if not metrics.get("evaluated") and not metrics.get("ground_truth_rows"):  # (unmatched ids are said below)
            why = why_nothing_evaluated(metrics.get("ground_truth_source"), 0, 0)
            line += f" ({why})" if why else ""
        truth = metrics.get("ground_truth_rows")
        if metrics.get("ground_truth_source") == "ground_truth_uri" and truth is not None:
            line += f" (ground truth: {truth - metrics['missing_predictions']} of {truth} rows matched an input row)"
        numbers = ", ".join(f"{k} {readable(v)}" for k, v in metrics.items() if isinstance(v, float))
        if numbers:
            line += f"; {numbers}"
        evaluated, unknown = metrics.get("evaluated") or 0, metrics.get("unknown_label_rows") or 0
        if evaluated and unknown == evaluated:
            line += (
                f"; WARNING: no ground-truth value of the {evaluated} evaluated rows is a label of the model "
                "(they are all unknown_labels in metrics.json): is label_column the right column?"
            )
    return line + f"; outputs in {result['run_uri']}"


def _raise_interrupt(signum, frame) -> None:
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt_on_signals() -> None:
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _raise_interrupt)


def _interrupted(message: str) -> int:
    from scorekeeper.errors import Interrupted

    print(f"scorekeeper: {message}", file=sys.stderr)
    return Interrupted.exit_code


def _interrupted_outside_the_flow(request: ScoreRequest) -> str:
    if request.run_name is None:
        return "interrupted; no range committed"
    try:
        from scorekeeper.flows.score import interrupted

        return str(interrupted(request, request.run_name))
    except Exception as exc:  # the message must not fail: the run's folder may be unreadable
        return f"interrupted; rerun with the same run name to resume ({type(exc).__name__})"


def _start_server():
    from scorekeeper.api_server import TemporaryServer

    return TemporaryServer()


@contextmanager
def _api(server) -> Iterator[None]:
    """Point Prefect at the CLI's temporary server where Prefect would have started one itself:
    no API URL in its settings (profile, prefect.toml, .env), and temporary servers allowed."""
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_UI_URL,
        get_current_settings,
        temporary_settings,
    )

    settings = get_current_settings()
    if server is None or settings.api.url or not settings.server.ephemeral.enabled:
        if server is not None:
            server.stop()
        yield
        return
    print(
        f"scorekeeper: started a temporary Prefect server on {server.api_url} (set PREFECT_API_URL to use a running one)", file=sys.stderr
    )
    # No UI is served, so no "View at" links to one (Prefect's own temporary server prints none).
    # No flow-run heartbeats: nothing watches them on a server that lives for this command only,
    # and the engine joins its heartbeat thread at the end of the run, in 1 s steps (up to a second).
    updates = {PREFECT_API_URL: server.wait_ready(), PREFECT_UI_URL: "", PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
    with temporary_settings(updates=updates):
        try:
            yield
        finally:
            _drain_prefect_clients()


def _drain_prefect_clients() -> None:
    """Send the logs and events Prefect still holds before the server goes: otherwise Prefect
    retries them against a stopped server at exit, for over a minute."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    EventsWorker.drain_all(timeout=10)


def _fail(message: str, code: int) -> int:
    print(f"scorekeeper: error: {message}", file=sys.stderr)
    return code


class _DropKnownErrors(logging.Filter):
    """Prefect logs a task's or flow's exception with its traceback; for problems the user must fix
    the one-line message printed by the CLI says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        from scorekeeper.errors import ScorekeeperError, known_error_names, storage_error

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (ScorekeeperError, KeyboardInterrupt)) or (exc is not None and storage_error(exc) is not None):
            return False
        if getattr(record, "scorekeeper_gate_failure", False):  # tasks/gates.py: the CLI's last line says it
            return False
        message = record.getMessage()
        return not any(name in message for name in known_error_names())


def _hide_known_tracebacks() -> None:
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs", "prefect.engine"):
        logger = logging.getLogger(name)
        for handler in logger.handlers:
            handler.addFilter(_DropKnownErrors())
        logger.addFilter(_DropKnownErrors())


def main(argv: list[str] | None = None) -> int:
    # No network but loopback here and on many scoring hosts: keep Prefect from phoning home.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    args = vars(build_parser().parse_args(argv))
    command = args.pop("command")
    if command == "demo":
        from scorekeeper.demo_model import build_demo

        print(build_demo(args["folder"], seed=args["seed"], force=args["force"], threads=args["threads"], verbose=True))
        return 0
    return _run(args)


def script() -> None:
    """The `scorekeeper` command: main(), then an exit without the interpreter's teardown.

    By then the scoring processes and the temporary server are stopped and Prefect's logs and
    events are sent (drained here too, for a server of the user's own); what is left is tearing
    down Prefect's, pyarrow's and DuckDB's modules and threads, about 0.7 s of a short run's wall.
    An unexpected error still ends the ordinary way, with its traceback."""
    code = main()
    if "prefect" in sys.modules:
        _drain_prefect_clients()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    script()
