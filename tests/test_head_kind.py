"""The head kind is one type (scorekeeper/head_kind.py): the parameter's values are its members and
`auto`, and no module outside it compares a head with the spelling of a kind."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from scorekeeper.head_kind import AUTO, HEAD_CHOICES, HeadChoice, HeadKind
from scorekeeper.metrics import registry
from scorekeeper.params import ScoreRequest

ROOT = Path(__file__).resolve().parents[1]
KINDS = "|".join(k.value for k in HeadKind)
# a kind's spelling beside a comparison, a membership test or a dict key / default: head == "multi_label"
SPELLED = re.compile(
    rf"""head\w*\s*(==|!=)\s*["']auto["']|(==|!=|\bin\b)\s*\(?\s*["']({KINDS})["']|["']({KINDS})["']\s*(==|!=|:)|head\s*[:=][^=\n]*["']({KINDS})["']"""
)


def test_the_head_parameter_takes_auto_and_every_kind():
    assert get_args(HeadChoice) == HEAD_CHOICES == (AUTO, *HeadKind)
    assert registry.HeadKind is HeadKind
    assert ScoreRequest.model_fields["head"].default == AUTO


def test_no_module_compares_a_head_with_the_spelling_of_a_kind():
    sources = [p for folder in ("scorekeeper", "tasks", "flows") for p in (ROOT / folder).rglob("*.py")]
    assert len(sources) > 50
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        if path.name != "head_kind.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SPELLED.search(line) and "HeadKind." not in line  # config problem_type -> HeadKind member
    ]
    assert not found, "\n".join(found)
    assert SPELLED.search('if head == "multi_label":') and SPELLED.search("x = {'regression': 1}")
