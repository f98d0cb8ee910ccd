"""The REST service's edges: secrets in what it prints, hosts that cannot be hosts, bodies
and batches bounded, parameters read strictly, its own metrics apart from the proxy's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import redis

from tests.redis_server import redis_server
from tests.serving import free_port


def test_the_start_up_line_masks_the_redis_password(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        client = redis.Redis.from_url(url)
        client.config_set("requirepass", "s3cret-pass")
        client.close()
        store = url.replace("redis://", "redis://:s3cret-pass@")
        port = free_port()
        command = [sys.executable, "-m", "polite", "serve", "--port", str(port),
                   "--store", store]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as process:
            try:
                assert process.stdout is not None
                line = process.stdout.readline()
                assert f"listening on http://127.0.0.1:{port}" in line, process.stderr
                assert "s3cret-pass" not in line
                assert "redis://:******@127.0.0.1:" in line
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                                  timeout=10) as api:
                    deadline = time.monotonic() + 15
                    while True:
                        try:
                            answer = api.get("/health")
                            break
                        except httpx.TransportError:
                            assert time.monotonic() < deadline
                            time.sleep(0.05)
                    assert answer.status_code == 200  # the password did reach Redis
            finally:
                process.terminate()
                process.wait(10)
