"""Web Bot Auth signatures: RFC 9421's Ed25519 vectors, the draft's vectors, the checks a
verifier makes, and interoperation with Cloudflare's ``web-bot-auth`` package."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from polite.core.identity import (
    SignatureOutcome,
    b64url_decode,
    directory_document,
    directory_keys,
    jwk_thumbprint,
    window_problem,
)
from polite.identity.keys import public_bytes
from polite.identity.signatures import (
    KeyDirectory,
    RequestSigner,
    directory_signature_problem,
    verify_signature,
)

# RFC 9421, B.1.4: test-key-ed25519 (its JWK form, as the draft's vectors give it).
RFC_D = "n4Ni-HpISpVObnQMW0wOhCKROaIKqKtW_2ZYb2p9KcU"
RFC_X = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"
RFC_KEY = Ed25519PrivateKey.from_private_bytes(b64url_decode(RFC_D))
# The key's RFC 7638 thumbprint, as the web-bot-auth draft's examples give it.
RFC_THUMBPRINT = "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"
AGENT = "https://signature-agent.test"


def _directory(*keys: Ed25519PrivateKey) -> KeyDirectory:
    return KeyDirectory(directory_keys(directory_document(public_bytes(k) for k in keys)))


def _verify(url: str, headers: list[tuple[str, str]], directory: KeyDirectory,
            **options: object) -> tuple[SignatureOutcome, str]:
    looked: list[str] = []

    async def lookup(agent: str) -> KeyDirectory:
        looked.append(agent)
        return directory

    check = asyncio.run(verify_signature("GET", url, headers, lookup, **options))  # type: ignore[arg-type]
    return check.outcome, check.how


def test_rfc9421_b26_ed25519_signature_is_reproduced() -> None:
    # RFC 9421, B.2.6: Ed25519 is deterministic, so the signature must be byte for byte
    headers = RequestSigner(RFC_KEY).sign(
        "POST", "https://example.com/foo?param=Value&Pet=dog",
        [("Date", "Tue, 20 Apr 2021 02:07:55 GMT"), ("Content-Type", "application/json"),
         ("Content-Length", "18")],
        ["date", "@method", "@path", "@authority", "content-type", "content-length"],
        created=1618884473, expires=None, nonce=None, label="sig-b26", tag=None,
        keyid="test-key-ed25519")
    fields = dict(headers)
    assert fields["Signature-Input"] == (
        'sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length")'
        ';created=1618884473;keyid="test-key-ed25519"')
    assert fields["Signature"] == (
        "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5l"
        "Ip5WPpBKRCw==:")


def test_thumbprint_and_directory_of_the_rfc_key() -> None:
    assert jwk_thumbprint({"kty": "OKP", "crv": "Ed25519", "x": RFC_X,
                           "kid": "test-key-ed25519"}) == RFC_THUMBPRINT
    assert RequestSigner(RFC_KEY).keyid == RFC_THUMBPRINT
    document = json.loads(directory_document([public_bytes(RFC_KEY)]))
    assert document == {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": RFC_X,
                                  "kid": RFC_THUMBPRINT}]}


# The web-bot-auth draft's Ed25519 vectors (Cloudflare's web_bot_auth_architecture_v2.json):
# created 1735689600, expires 4889289600.
_V2_AUTHORITY_ONLY = (
    'sig1=("@authority");created=1735689600;keyid="' + RFC_THUMBPRINT + '";alg="ed25519";'
    'expires=4889289600;nonce="zIW8+cdmA3vdYagbxojpONwa/l0EKJ/O3/wD486VvsQjO/RxPaSt6ZxvQaMcQzN'
    'nqKN/mQ6hpGiFro2L2qkz5A==";tag="web-bot-auth"',
    "sig1=:QKN4fTdIYfh82fvoZCQiQA1weuozfCS/Led2zTMbewMMqH8PI2Wsy/5c4ao6B6D09nraNQdBNOADg8aM1M"
    "qfCg==:")
_V2_WITH_AGENT = (
    'sig2=("@authority" "signature-agent";key="agent2");created=1735689600;keyid="'
    + RFC_THUMBPRINT + '";alg="ed25519";expires=4889289600;nonce="n9p433xm+NJ3ph3upfBIGmsuwH'
    'w387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==";tag="web-bot-auth"',
    "sig2=:RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhE"
    "wYCCg==:")
_V2_URL = "https://example.com/path/to/resource"


def test_draft_vector_is_signed_byte_for_byte() -> None:
    nonce = _V2_AUTHORITY_ONLY[0].split('nonce="')[1].split('"')[0]
    fields = dict(RequestSigner(RFC_KEY).sign("GET", _V2_URL, [], ["@authority"],
                                              created=1735689600, expires=4889289600,
                                              nonce=nonce))
    assert (fields["Signature-Input"], fields["Signature"]) == _V2_AUTHORITY_ONLY


def test_draft_vector_with_signature_agent_member_verifies() -> None:
    signature_input, signature = _V2_WITH_AGENT
    headers = [("Signature-Agent", 'agent2="https://signature-agent.test"'),
               ("Signature-Input", signature_input), ("Signature", signature)]
    # the vectors' validity runs for a century: allowed here, refused by default
    outcome, how = _verify(_V2_URL, headers, _directory(RFC_KEY), now=1735689700,
                           max_validity_s=10**10)
    assert outcome is SignatureOutcome.VERIFIED, how
    outcome, how = _verify(_V2_URL, headers, _directory(RFC_KEY), now=1735689700)
    assert outcome is SignatureOutcome.INVALID and "more than 300 s" in how


def _signed(url: str = "http://127.0.0.1:8080/a?b=1", *, clock: float | None = None,
            key: Ed25519PrivateKey = RFC_KEY) -> list[tuple[str, str]]:
    signer = RequestSigner(key, AGENT, clock=(lambda: clock) if clock is not None
                           else time.time)
    return signer.headers("GET", url)


def test_polite_signed_request_verifies() -> None:
    headers = _signed()
    assert dict(headers)["Signature-Agent"] == f'sig1="{AGENT}"'
    outcome, how = _verify("http://127.0.0.1:8080/a?b=1", headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.VERIFIED, how
    # the path is not covered (the draft covers the authority only): another path verifies
    assert _verify("http://127.0.0.1:8080/other", headers,
                   _directory(RFC_KEY))[0] is SignatureOutcome.VERIFIED


def test_tampered_authority_is_invalid() -> None:
    outcome, how = _verify("http://127.0.0.2:8080/a", _signed(), _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "does not verify" in how


def test_tampered_signature_agent_is_invalid() -> None:
    headers = [(n, 'sig1="https://elsewhere.test"' if n == "Signature-Agent" else v)
               for n, v in _signed()]
    outcome, how = _verify("http://127.0.0.1:8080/a", headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "does not verify" in how


def test_expired_signature_is_invalid() -> None:
    headers = _signed(clock=time.time() - 3600)
    outcome, how = _verify("http://127.0.0.1:8080/a", headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "expired" in how


def test_future_signature_is_invalid() -> None:
    outcome, how = _verify("http://127.0.0.1:8080/a", _signed(clock=time.time() + 600),
                           _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "future" in how


def test_wrong_tag_is_invalid_not_verified() -> None:
    now = int(time.time())
    headers = RequestSigner(RFC_KEY).sign(
        "GET", "http://127.0.0.1:8080/a", [("Signature-Agent", f'sig1="{AGENT}"')],
        ["@authority", "signature-agent"], created=now, expires=now + 60, nonce=None,
        tag="some-other-purpose")
    outcome, how = _verify("http://127.0.0.1:8080/a", headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "web-bot-auth" in how


def test_unknown_key_is_invalid() -> None:
    other = Ed25519PrivateKey.generate()
    outcome, how = _verify("http://127.0.0.1:8080/a", _signed(key=other), _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "not in the directory" in how


def test_directory_failure_is_unverifiable() -> None:
    outcome, how = _verify("http://127.0.0.1:8080/a", _signed(),
                           KeyDirectory({}, "answered 302, not 200"))
    assert outcome is SignatureOutcome.UNVERIFIABLE and "302" in how


def test_unsigned_request_is_absent() -> None:
    assert _verify("http://127.0.0.1:8080/a", [("User-Agent", "x")],
                   _directory(RFC_KEY))[0] is SignatureOutcome.ABSENT


def test_a_signature_for_another_purpose_claims_nothing() -> None:
    now = int(time.time())
    headers = RequestSigner(RFC_KEY).sign("GET", "http://127.0.0.1:8080/a", [],
                                          ["@authority"], created=now, expires=now + 60,
                                          nonce=None, tag="some-other-purpose")
    assert _verify("http://127.0.0.1:8080/a", headers,
                   _directory(RFC_KEY))[0] is SignatureOutcome.ABSENT


def test_uncovered_signature_agent_is_invalid() -> None:
    now = int(time.time())
    headers = RequestSigner(RFC_KEY).sign(
        "GET", "http://127.0.0.1:8080/a", [("Signature-Agent", f'sig1="{AGENT}"')],
        ["@authority"], created=now, expires=now + 60, nonce=None)
    outcome, how = _verify("http://127.0.0.1:8080/a", headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "not covered" in how


def test_window_rules() -> None:
    assert window_problem(100, 160, 120) is None
    assert window_problem(None, 160, 120) is not None  # created is required
    assert window_problem(100, None, 120) is not None  # so is expires
    assert window_problem(100, 90, 95) is not None  # expires before created


# Interoperation with Cloudflare's web-bot-auth package (npm). It is found through
# WEB_BOT_AUTH_NODE_MODULES, a node_modules folder holding it (`npm install --prefix DIR
# web-bot-auth`); tests reach only loopback, so it is not installed here.
def _node_modules() -> Path:
    where = os.environ.get("WEB_BOT_AUTH_NODE_MODULES")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not where or not (Path(where) / "web-bot-auth" / "package.json").exists():
        pytest.skip("WEB_BOT_AUTH_NODE_MODULES does not name a node_modules folder holding "
                    "web-bot-auth (npm install --prefix DIR web-bot-auth)")
    return Path(where)


_NODE = """
const wba = require(process.argv[1] + "/web-bot-auth");
const crypto = require(process.argv[1] + "/web-bot-auth/dist/crypto.js");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
(async () => {
  if (input.verify) {
    const request = new Request(input.url, {headers: input.headers});
    try {
      await wba.verify(request, await crypto.verifierFromJWK(input.jwk));
      console.log(JSON.stringify({ok: true}));
    } catch (e) { console.log(JSON.stringify({ok: false, error: String(e)})); }
  } else if (input.directory) {
    const request = new Request(input.url);
    const response = new Response("{}");
    const now = new Date();
    const signed = await wba.directoryResponseHeaders({request, response},
      [await crypto.signerFromJWK(input.jwk)],
      {created: now, expires: new Date(now.getTime() + 60000)});
    console.log(JSON.stringify(signed));
  } else {
    const request = new Request(input.url, {headers: input.headers});
    const now = new Date();
    const signed = await wba.signatureHeaders(request, await crypto.signerFromJWK(input.jwk),
      {created: now, expires: new Date(now.getTime() + 60000)});
    console.log(JSON.stringify(signed));
  }
})();
"""


def _node(modules: Path, message: dict[str, object]) -> dict[str, object]:
    done = subprocess.run(["node", "-e", _NODE, str(modules)], input=json.dumps(message),
                          capture_output=True, text=True, timeout=60, check=True)
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_request_signed_by_polite_verifies_in_web_bot_auth() -> None:
    modules = _node_modules()
    url = "http://127.0.0.1:8080/page"
    headers = _signed(url)
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": RFC_X}
    assert _node(modules, {"verify": True, "url": url, "headers": dict(headers),
                           "jwk": jwk}) == {"ok": True}
    # and a tampered one does not: the check above can fail
    assert _node(modules, {"verify": True, "url": "http://127.0.0.2:8080/page",
                           "headers": dict(headers), "jwk": jwk})["ok"] is False


def test_request_signed_by_web_bot_auth_verifies_in_polite() -> None:
    modules = _node_modules()
    url = "http://127.0.0.1:8080/page"
    agent = {"Signature-Agent": f'"{AGENT}"'}  # the package's (earlier) string form
    signed = _node(modules, {"url": url, "headers": agent,
                             "jwk": {"kty": "OKP", "crv": "Ed25519", "x": RFC_X,
                                     "d": RFC_D}})
    headers = [*agent.items(), ("Signature-Input", str(signed["Signature-Input"])),
               ("Signature", str(signed["Signature"]))]
    outcome, how = _verify(url, headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.VERIFIED, how
    assert _verify("http://127.0.0.3:8080/page", headers,
                   _directory(RFC_KEY))[0] is SignatureOutcome.INVALID


def test_a_directory_signed_by_web_bot_auth_is_taken_by_polite() -> None:
    modules = _node_modules()
    url = "https://bot.example.test/.well-known/http-message-signatures-directory"
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": RFC_X, "d": RFC_D}
    signed = _node(modules, {"directory": True, "url": url, "jwk": jwk})
    fields = [("Signature-Input", str(signed["Signature-Input"])),
              ("Signature", str(signed["Signature"]))]
    body = directory_document([public_bytes(RFC_KEY)])
    keys = directory_keys(body)
    assert directory_signature_problem(url, fields, keys, body, now=time.time()) is None
    elsewhere = url.replace("bot.example.test", "other.example.test")
    assert "does not verify" in str(directory_signature_problem(elsewhere, fields, keys, body,
                                                                now=time.time()))


# draft-ietf-webbotauth-httpsig-protocol (working-group repository, commit 5a71ee1f),
# "Signed Directory Response": the directory served for signature-agent.test, its
# Content-Digest and the signature the RFC 9421 Ed25519 key made over it.
_WG_DIRECTORY_URL = "https://signature-agent.test/.well-known/http-message-signatures-directory"
_WG_DIRECTORY_BODY = (
    b'{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38'
    b'r0U","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}')
_WG_DIRECTORY_DIGEST = "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:"
_WG_DIRECTORY_FIELDS = [
    ("Content-Digest", _WG_DIRECTORY_DIGEST),
    ("Signature-Input", 'binding=("@authority";req "content-digest");created=1735689600'
     ';expires=4889289600;keyid="' + RFC_THUMBPRINT + '"'
     ';tag="http-message-signatures-directory"'),
    ("Signature", "binding=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/"
     "UMkBxsigzChM1Gpz7gOVBg==:")]


def test_working_group_signed_directory_response_is_taken() -> None:
    keys = directory_keys(_WG_DIRECTORY_BODY)
    assert list(keys) == [RFC_THUMBPRINT]
    assert directory_signature_problem(_WG_DIRECTORY_URL, _WG_DIRECTORY_FIELDS, keys,
                                       _WG_DIRECTORY_BODY, now=1735689700) is None
    # another key set under the captured signature, or another authority: refused
    swapped = _WG_DIRECTORY_BODY.replace(b'"use":"sig"', b'"use":"enc"')
    assert "does not verify" in str(directory_signature_problem(
        _WG_DIRECTORY_URL, _WG_DIRECTORY_FIELDS, keys, swapped, now=1735689700))
    elsewhere = _WG_DIRECTORY_URL.replace("signature-agent.test", "copy.test")
    assert "does not verify" in str(directory_signature_problem(
        elsewhere, _WG_DIRECTORY_FIELDS, keys, _WG_DIRECTORY_BODY, now=1735689700))
    # created in the future is refused, as a certificate not yet valid would be
    assert "in the future" in str(directory_signature_problem(
        _WG_DIRECTORY_URL, _WG_DIRECTORY_FIELDS, keys, _WG_DIRECTORY_BODY,
        now=1735689600 - 3600))


def test_a_directory_is_signed_as_the_working_group_draft_shows() -> None:
    from polite.identity.signatures import sign_directory

    fields = sign_directory([RequestSigner(RFC_KEY)], _WG_DIRECTORY_URL, _WG_DIRECTORY_BODY,
                            now=1735689600)
    assert dict(fields)["Content-Digest"] == _WG_DIRECTORY_DIGEST
    assert dict(fields)["Signature-Input"].startswith(
        'binding0=("@authority";req "content-digest");created=1735689600')
    keys = directory_keys(_WG_DIRECTORY_BODY)
    assert directory_signature_problem(_WG_DIRECTORY_URL, fields, keys, _WG_DIRECTORY_BODY,
                                       now=1735689700) is None


def test_a_signature_agent_member_with_parameters_names_nothing() -> None:
    from polite.identity.signatures import signature_agent_url

    # draft-ietf-webbotauth-httpsig-protocol (commit 5a71ee1f), Signature-Agent: members
    # carry no parameters, and a verifier ignores one that does.
    assert signature_agent_url('sig1="https://signer.example.com"', "sig1") == \
        "https://signer.example.com"
    assert signature_agent_url('sig1="https://signer.example.com";v=1', "sig1") is None
    assert signature_agent_url('"https://signature-agent.test"', "sig2") == AGENT  # legacy
    # the only member stands for the label when the whole field is covered, not otherwise
    assert signature_agent_url('agent2="https://a.test"', "sig2") == "https://a.test"
    assert signature_agent_url('agent2="https://a.test"', "sig2", exact=True) is None


def test_a_signature_is_not_attributed_to_a_member_it_does_not_cover() -> None:
    # The draft's Ed25519 vector covers the member agent2; here the field has another.
    signature_input, signature = _V2_WITH_AGENT
    headers = [("Signature-Agent", 'other="https://elsewhere.test"'),
               ("Signature-Input", signature_input), ("Signature", signature)]
    looked: list[str] = []

    async def lookup(agent: str) -> KeyDirectory:
        looked.append(agent)
        return _directory(RFC_KEY)

    check = asyncio.run(verify_signature("GET", _V2_URL, headers, lookup, now=1735689700,
                                         max_validity_s=10**10))
    assert check.outcome is SignatureOutcome.INVALID and check.agent is None, check.how
    assert looked == []  # the uncovered directory is not even fetched


def test_a_signature_bound_by_target_uri_verifies() -> None:
    # The protocol draft asks for @authority or @target-uri; either binds the signature.
    url = "https://example.com/path?q=1"
    now = int(time.time())
    headers = RequestSigner(RFC_KEY).sign(
        "GET", url, [("Signature-Agent", f'sig1="{AGENT}"')],
        ["@target-uri", '"signature-agent";key="sig1"'], created=now, expires=now + 60,
        nonce=None)
    assert '"@authority"' not in dict(headers)["Signature-Input"]
    outcome, how = _verify(url, headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.VERIFIED, how
    assert _verify(url.replace("q=1", "q=2"), headers,
                   _directory(RFC_KEY))[0] is SignatureOutcome.INVALID
    unbound = RequestSigner(RFC_KEY).sign(
        "GET", url, [("Signature-Agent", f'sig1="{AGENT}"')],
        ['"signature-agent";key="sig1"'], created=now, expires=now + 60, nonce=None)
    outcome, how = _verify(url, unbound, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "@target-uri" in how


# draft-ietf-webbotauth-httpsig-protocol (commit 5a71ee1f), Test Vectors, Ed25519: its
# dictionary-form vector is _V2_WITH_AGENT above; this is its legacy sf-string one.
_WG_LEGACY = (
    'sig2=("@authority" "signature-agent");created=1735689600;keyid="' + RFC_THUMBPRINT
    + '";alg="ed25519";expires=1735693200;nonce="e8N7S2MFd/qrd6T2R3tdfAuuANngKI7LFtKYI/vowzk4'
    'lAZYadIX6wW25MwG7DCT9RUKAJ0qVkU0mEeLElW1qg==";tag="web-bot-auth"',
    "sig2=:jdq0SqOwHdyHr9+r5jw3iYZH6aNGKijYp/EstF4RQTQdi5N5YYKrD+mCT1HA1nZDsi6nJKuHxUi/5Syp3rL"
    "WBA==:")


def test_working_group_legacy_string_vector_verifies_in_its_hour() -> None:
    headers = [("Signature-Agent", f'"{AGENT}"'), ("Signature-Input", _WG_LEGACY[0]),
               ("Signature", _WG_LEGACY[1])]
    # an hour's window: more than a verifier takes by default (five minutes), taken by one
    # set to the hour
    outcome, how = _verify(_V2_URL, headers, _directory(RFC_KEY), now=1735689700)
    assert outcome is SignatureOutcome.INVALID and "valid for 3600 s, more than 300 s" in how
    outcome, how = _verify(_V2_URL, headers, _directory(RFC_KEY), now=1735689700,
                           max_validity_s=3600)
    assert outcome is SignatureOutcome.VERIFIED, how
    outcome, how = _verify(_V2_URL, headers, _directory(RFC_KEY), now=1735693200 + 3600,
                           max_validity_s=3600)
    assert outcome is SignatureOutcome.INVALID and "expired" in how
    tampered = [*headers[:1], ("Signature-Agent", '"https://other.test"')][1:] + headers[1:]
    assert _verify(_V2_URL, tampered, _directory(RFC_KEY), now=1735689700,
                   max_validity_s=3600)[0] is SignatureOutcome.INVALID


def test_working_group_directory_example_yields_the_key_by_thumbprint() -> None:
    # The draft's Directory Format example: its kid is not the key's thumbprint, so keys
    # are found by the thumbprint computed from the key itself, never by kid.
    example = json.dumps({"keys": [{
        "kty": "OKP", "crv": "Ed25519", "kid": "NFcWBst6DXG-N35nHdzMrioWntdzNZghQSkjHNMMSjw",
        "x": RFC_X, "use": "sig", "nbf": 1712793600, "exp": 1715385600}]}).encode()
    assert directory_keys(example) == {RFC_THUMBPRINT: public_bytes(RFC_KEY)}


@pytest.mark.parametrize("url", ["http://[/a", "http://127.0.0.1:99999/a", "http:///a"])
def test_an_authority_that_cannot_be_read_is_invalid_not_a_crash(url: str) -> None:
    headers = _signed("http://127.0.0.1:8080/a")
    outcome, how = _verify(url, headers, _directory(RFC_KEY))
    assert outcome is SignatureOutcome.INVALID and "cannot be read" in how
