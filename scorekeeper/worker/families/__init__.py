"""The registry of model families, looked up by `config.model_type`.

A family (`base.Family`) holds what scorekeeper knows about one architecture: how its classifier
comes apart for pipeline mode, where its positions start, the position-0 form of its last layer,
and the tiny configs tests build. Encoders live in `encoders.py`, decoders in `decoders.py`;
adding a family is adding it to one of those files (a new file is imported below), and
`tests/test_families.py` checks every registered family.

Replica mode scores any sequence classifier transformers loads; the registry says which ones
pipeline mode can split and which get the first-token last layer.

Reading the registry imports no torch (the flow checks a model folder's config with it before
anything is written); each family's torch side is imported when a scoring process first uses it.
"""

from __future__ import annotations

from scorekeeper.errors import ModelError
from scorekeeper.worker.families import decoders, encoders
from scorekeeper.worker.families.base import Chain, Family, FirstToken, HFModule, Parts, Tiny, TinyTokens

FAMILIES: tuple[Family, ...] = encoders.FAMILIES + decoders.FAMILIES

_BY_MODEL_TYPE: dict[str, Family] = {}
for _family in FAMILIES:
    for _model_type in _family.model_types:
        if _model_type in _BY_MODEL_TYPE:
            raise RuntimeError(f"model_type {_model_type!r} is claimed by {_BY_MODEL_TYPE[_model_type].name} and {_family.name}")
        _BY_MODEL_TYPE[_model_type] = _family

__all__ = [
    "Chain",
    "FAMILIES",
    "Family",
    "FirstToken",
    "HFModule",
    "Parts",
    "Tiny",
    "TinyTokens",
    "family_for",
    "find_family",
    "pipeline_family",
    "supported",
    "tiny_models",
]


def supported() -> str:
    """The families the registry knows, as a person reads them."""
    parts = []
    for kind in ("encoder", "decoder"):
        names = [f.describe() for f in FAMILIES if f.kind == kind]
        if names:
            parts.append(f"{kind}s: {', '.join(names)}")
    return "; ".join(parts)


def find_family(model_type: str | None) -> Family | None:
    """The family of `model_type`, or None when the registry does not know it."""
    return _BY_MODEL_TYPE.get(model_type) if model_type else None


def family_for(model_type: str | None) -> Family:
    """The family of `model_type`, or a ModelError naming the supported types."""
    family = find_family(model_type)
    if family is None:
        raise ModelError(f"no model family is registered for model_type {model_type!r}; supported: {supported()}")
    return family


def pipeline_family(model_type: str | None, architecture: str | None = None) -> Family:
    """The family pipeline mode splits `model_type` by, or a ModelError saying that it cannot (the
    flow asks before staging, from config.json; the scoring processes again, from the model)."""
    family = find_family(model_type)
    if family is None:
        what = f"a {architecture} (model_type {model_type!r})" if architecture else f"model_type {model_type!r}"
        raise ModelError(f"pipeline mode cannot split {what}; it supports {supported()}. Use mode=replica for other architectures.")
    return family


def tiny_models() -> dict[str, tuple[Family, Tiny]]:
    """Every tiny instance the families declare, by name ("bert", "minilm", "llama", ...)."""
    return {tiny.name: (family, tiny) for family in FAMILIES for tiny in family.tiny}
