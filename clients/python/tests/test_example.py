"""The book's example runs as printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ALICE_KEY, Server

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "quickstart.py"


def test_the_quickstart_example_runs_against_the_server(server: Server) -> None:
    env = dict(os.environ, AGENTWIRE_URL=server.url, AGENTWIRE_TOKEN=ALICE_KEY)
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "Hello world",
        "the agent asked for get_location",
        "Tool result received",
    ]


def test_the_book_shows_the_example_the_tests_run() -> None:
    chapter = Path(__file__).resolve().parents[3] / "docs" / "src" / "client-python.md"
    if not (chapter.parents[2] / "Cargo.toml").exists():
        pytest.skip("outside the agentwire repository (an unpacked sdist)")
    text = chapter.read_text()
    start = text.index("```python\n") + len("```python\n")
    block = text[start : text.index("```\n", start)]
    assert block == EXAMPLE.read_text()
