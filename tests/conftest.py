"""Shared fixtures: tiny models built once per session, and a quiet, offline environment."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Tiny classifiers (random weights, safetensors, local tokenizers) and a LoRA adapter."""
    from tests.models import build_lora_adapter, build_tiny_classifier

    root = tmp_path_factory.mktemp("models")
    built = {
        "bert": str(build_tiny_classifier(root / "bert", "bert", seed=1)),
        "llama": str(build_tiny_classifier(root / "llama", "llama", seed=2)),
    }
    built["bert_adapter"] = str(build_lora_adapter(built["bert"], root / "bert_adapter", seed=3))
    return built
