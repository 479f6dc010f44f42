"""The fenced code blocks of the project's Markdown files, for the tests that run them (the README's
tour, docs/testing.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"```(\w*)\n(.*?)```", flags=re.S)


def code_blocks(path: Path) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block of ``path``, in order (language ``""`` when none)."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(path.read_text())]


def python_blocks(path: Path) -> list[str]:
    """The code of the ```` ```python ```` blocks of ``path``, in order."""
    return [code for language, code in code_blocks(path) if language == "python"]
