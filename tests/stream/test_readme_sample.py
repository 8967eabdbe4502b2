"""The stream layer page's sample (docs/layers/stream.md, once the README's) runs as shown
and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "layers" / "stream.md"


def test_the_readme_stream_sample_runs() -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("# The stream layer") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the stream layer's sample is missing"
    names: dict[str, object] = {}
    exec(compile(block.group(1), str(PAGE), "exec"), names)
    pack = names["pack"]
    assert (pack.begin_ts, pack.end_ts) == (0, 5)
    assert sorted(row.row_id for msg in pack.msgs for row in msg.rows) == [10, 11]
    assert [p.channel for p in names["checkpoint"]] == ["dml-0", "dml-1"]
