"""What the drift step (drift.py) and a kind's own drift signals (base.HeadEvaluation.drift_signals)
share: a run as the drift step reads it, and the signals being made, each a view of both runs'
values (docs/drift.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from scorekeeper.evaluation.duck import sql

if TYPE_CHECKING:
    from scorekeeper.evaluation.duck import Connection


@dataclass(frozen=True)
class RunSide:
    """One run as the drift step reads it: its predictions (a view), its columns, its staged input's
    slice columns by the user's name (the staged column holding each), its labels."""

    side: str  # "reference" or "current"
    predictions: str  # the view of its predictions.parquet
    columns: frozenset[str]
    labels: list[str]
    staged: str | None = None  # the view of its staged input, when it has one
    slices: dict[str, str] | None = None  # user's slice column -> staged column
    unstaged: str | None = None  # why it has no staged input to read slices from, when it has none


@dataclass(frozen=True)
class Signal:
    """One signal as a view of both runs' values (`reference`, and `num` or `cat`), named `view`."""

    name: str
    view: str
    numeric: bool


@dataclass
class SignalViews:
    """The signals being made on `con`, in order, and the ones skipped with the reason: what a kind's
    `drift_signals` adds its own to (base.HeadEvaluation)."""

    con: Connection
    sources: dict[str, str]  # the macros `reference` and `current`: each run's predictions view
    signals: list[Signal] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def view(self, name: str, file: str, numeric: bool, **macros) -> None:
        """The signal `name` as the view `file` makes of both runs' values (the predictions by default)."""
        signal = Signal(name, f"drift_signal_{len(self.signals)}", numeric)
        self.con.execute(sql(file, view=signal.view, **(self.sources | macros)))
        self.signals.append(signal)

    def skip_unshared(self, prefix: str, reference: RunSide, current: RunSide) -> list[tuple[int, str]]:
        """The per-output signals `prefix` + name: those of outputs the reference's model lacks
        skipped; the shared ones as (this run's position, name)."""
        for name in current.labels:
            if name not in reference.labels:
                self.skipped[prefix + name] = "the reference run's model has no such output"
        return [(i, name) for i, name in enumerate(current.labels) if name in reference.labels]


class OwnSignals(Protocol):
    """What the drift step asks of a kind of head (base.HeadEvaluation.drift_signals): its own signals."""

    def drift_signals(self, views: SignalViews, reference: RunSide, current: RunSide) -> None: ...
