"""The Python of docs/tutorial.md, run verbatim: every python block, in order,
as one program from a directory laid out like the repository root, with the
binary as ./knowdp; a text block right after a python block is output that
must appear."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import unittest

from . import _support as s

TUTORIAL = s.REPO / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def python_blocks() -> "list[tuple[str, list[str]]]":
    """Each python block with the lines of the text block after it (if any)."""
    found = [(m.group(1), m.group(2)) for m in BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8"))]
    out = []
    for i, (lang, body) in enumerate(found):
        if lang != "python":
            continue
        expect = []
        if i + 1 < len(found) and found[i + 1][0] == "text":
            expect = [line for line in found[i + 1][1].splitlines() if line.strip()]
        out.append((body, expect))
    return out


class TutorialTest(unittest.TestCase):
    def test_python_blocks_run_verbatim(self) -> None:
        binary = s.binary()
        blocks = python_blocks()
        self.assertGreaterEqual(len(blocks), 5)
        if not s.frames_expected():
            # Without pandas, the blocks that use it (pd, and the people
            # it reads) cannot run; the others must, in a Python where
            # pandas cannot be imported.
            blocks = [(b, e) for b, e in blocks if not any(w in b for w in ("pd.", "pandas", "people"))]
        code = "\n".join(b for b, _ in blocks)
        if not s.frames_expected():
            code = "import sys\nsys.modules['pandas'] = None\n" + code
        with tempfile.TemporaryDirectory() as d:
            os.symlink(s.DATA, os.path.join(d, "data"))
            os.symlink(binary, os.path.join(d, "knowdp"))
            env = dict(os.environ, PYTHONPATH=str(s.REPO / "python"), PYTHONDONTWRITEBYTECODE="1")
            p = subprocess.run([sys.executable, "-c", code], cwd=d, env=env, capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(p.returncode, 0, f"the tutorial's Python failed:\n{p.stderr}\n{p.stdout}")
            for _, expect in blocks:
                for line in expect:
                    self.assertIn(line, p.stdout, "the tutorial shows output its code does not print")
            self.assertTrue(os.path.isfile(os.path.join(d, "arrests-published", "release.json")))


if __name__ == "__main__":
    unittest.main()
