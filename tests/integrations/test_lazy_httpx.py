"""httpx is imported by the drop-ins only where it is used: by a gate on a running ``polite
serve`` (and by the httpx drop-in itself). Its import, its command line's (click, rich,
pygments) included, cost each Scrapy process a quarter of a second of CPU."""

from __future__ import annotations

import subprocess
import sys


def test_the_scrapy_and_requests_drop_ins_start_without_httpx() -> None:
    script = ("import sys, polite.integrations, polite.integrations.scrapy, "
              "polite.integrations.requests; "
              "print(sorted(name for name in sys.modules if name.split('.')[0] == 'httpx'))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
