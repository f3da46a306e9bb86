"""Every Python example in ``docs/windows.md`` runs as written (and declares a valid
computation class)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_window_docs_examples_run() -> None:
    text = (ROOT / "docs" / "windows.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    for index, block in enumerate(blocks):
        namespace: dict[str, object] = {"__name__": f"windows_md_{index}"}
        exec(compile(block, f"docs/windows.md python block {index}", "exec"), namespace)
