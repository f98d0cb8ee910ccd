"""``polite keys new`` / ``polite keys directory`` and ``polite serve --key``."""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import time
from pathlib import Path

import pytest

from polite.cli import main
from polite.cli.keys import add_keys_command
from polite.core.identity import DIRECTORY_MEDIA_TYPE, DIRECTORY_PATH, directory_keys
from polite.identity.signatures import directory_signature_problem
from tests.commands import run
from tests.serving import polite_serve


def _polite(*argv: str) -> tuple[int, str, str]:
    done = run(*argv, timeout=60)
    return done.returncode, done.stdout, done.stderr


def test_new_key_is_owner_only_and_never_overwritten(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    code, out, _ = _polite("keys", "new", str(key))
    assert code == 0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    keyid = out.split("keyid ")[1].strip()
    before = key.read_bytes()
    code, _, err = _polite("keys", "new", str(key))
    assert code == 2 and "already exists" in err
    assert key.read_bytes() == before
    code, out, _ = _polite("keys", "directory", str(key))
    assert code == 0
    assert list(directory_keys(out.encode())) == [keyid]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_key_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    os.chmod(key, mode)
    code, out, err = _polite("keys", "directory", str(key))
    assert code == 2 and "readable by others" in err and out == ""
    assert "Traceback" not in err


def test_not_a_key_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("hello\n")
    os.chmod(junk, 0o600)
    code, _, err = _polite("keys", "directory", str(junk))
    assert code == 2 and "not an unencrypted PEM private key" in err
    code, _, err = _polite("keys", "directory", str(tmp_path / "missing.pem"))
    assert code == 2 and "missing.pem" in err and "Traceback" not in err


def test_serve_key_hosts_the_directory(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    parser = argparse.ArgumentParser()
    add_keys_command(parser.add_subparsers())
    args = parser.parse_args(["keys", "new", str(key)])
    out = io.StringIO()
    assert args.handler(args, out) == 0
    keyid = out.getvalue().split("keyid ")[1].strip()
    with polite_serve("--store", "memory://", "--key", str(key)) as api:
        answer = api.get(DIRECTORY_PATH)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == DIRECTORY_MEDIA_TYPE
        assert "max-age" in answer.headers["cache-control"]
        assert list(directory_keys(answer.content)) == [keyid]
        assert json.loads(answer.content)["keys"][0]["kid"] == keyid
        # the answer is signed by the key it lists, for the authority it was asked at
        assert 'tag="http-message-signatures-directory"' in answer.headers["signature-input"]
        keys = directory_keys(answer.content)
        url = str(api.base_url.join(DIRECTORY_PATH))
        fields = list(answer.headers.items())
        assert directory_signature_problem(url, fields, keys, answer.content,
                                           now=time.time()) is None
        elsewhere = url.replace("127.0.0.1", "127.0.0.2")
        body = answer.content
        assert "does not verify" in str(directory_signature_problem(elsewhere, fields, keys,
                                                                    body, now=time.time()))
        assert "expired" in str(directory_signature_problem(url, fields, keys, body,
                                                            now=time.time() + 3600))
        # the signature covers the body's digest: another body under it is refused
        assert '"content-digest"' in answer.headers["signature-input"]
        assert "does not verify" in str(directory_signature_problem(url, fields, keys,
                                                                    body + b" ",
                                                                    now=time.time()))


def test_serve_without_key_has_no_directory() -> None:
    with polite_serve("--store", "memory://") as api:
        assert api.get(DIRECTORY_PATH).status_code == 404


def test_serve_refuses_a_shared_key(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    os.chmod(key, 0o644)
    code, _, err = _polite("serve", "--store", "memory://", "--port", "0", "--key", str(key))
    assert code == 2 and "--key" in err and "readable by others" in err
