"""The manual built once a run for the tests that read it: ``mkdocs build --strict``, as
``make docs`` runs it, into a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import made_once
from tests.docs.docsite import ROOT


@dataclass(frozen=True)
class BuiltSite:
    path: Path
    log: str
    seconds: float


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    # The docs extra is part of what make test installs: without it this fails, not skips.
    import mkdocs  # noqa: F401

    def build(folder: Path) -> None:
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                               "--site-dir", str(folder / "site")], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        log = done.stdout + done.stderr
        assert done.returncode == 0, log
        (folder / "build.log").write_text(log, "utf-8")
        (folder / "seconds").write_text(f"{time.monotonic() - started}")

    folder = made_once(tmp_path_factory, "docs", build)  # once a run, whichever worker
    return BuiltSite(folder / "site", (folder / "build.log").read_text("utf-8"),
                     float((folder / "seconds").read_text()))
