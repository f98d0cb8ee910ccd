"""What a fresh interpreter loads of a package when it imports some of polite's modules."""

from __future__ import annotations

import json
import subprocess
import sys


def loaded(modules: str, package: str) -> list[str]:
    """The modules of ``package`` a new process holds once it has imported ``modules`` (a
    comma-separated list, as ``import`` takes it)."""
    script = (f"import json, sys, {modules}; print(json.dumps(sorted(name for name in "
              f"sys.modules if name.split('.')[0] == {package!r})))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))
