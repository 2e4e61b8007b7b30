"""What the report says about a run beside its metrics, made once by the report step
(tasks/report.py) and read by attribute: the request's public parameters (ScoreRequest.public_dict:
secrets redacted) and what the run found out (its id, the fingerprints, the processes that scored,
the deployment it ran from)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict


class RunFacts(BaseModel):
    """The run's facts the report (report/report.py, report/labelling_report.py) and the Prefect
    summary show. `parameters` holds every public parameter as request.json does: a rerun's command
    repeats those that change predictions (labelling_report.labels_back_commands)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    input_uri: str
    model_uri: str
    adapter_uri: str | None = None
    merge_adapter: bool = True
    mode: str
    num_processes: int | str | None = None  # the processes that scored (or the request's, "auto" included)
    dtype: str | None = None  # the dtype asked for (scoring.dtype says which one ran)
    slice_columns: list[str] = []
    id_column: str | None = None
    label_column: str | None = None
    label_budget: int | None = None
    label_sampling: str | None = None
    as_of: str | None = None
    input_fingerprint: str | None = None
    model_fingerprint: str | None = None
    adapter_fingerprint: str | None = None
    deployment: str | None = None  # 'flow name/deployment name' the flow run came from, if any
    parameters: dict[str, Any] = {}

    @classmethod
    def of(cls, info: RunFacts | Mapping[str, Any]) -> RunFacts:
        """The facts of a run_info mapping (the request's public dict with the run's own facts): the
        one place a mapping of them becomes the model."""
        if isinstance(info, RunFacts):
            return info
        fields = {name: info[name] for name in cls.model_fields if name != "parameters" and name in info}
        return cls(**fields, parameters=dict(info))
