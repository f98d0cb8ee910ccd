"""Signing a robot's requests and checking a request's signature, per Web Bot Auth.

The signature base (RFC 9421, 2.5) is built by ``http-message-signatures``; this module
chooses what is covered and checks what the drafts require of the parameters.
"""

from __future__ import annotations

import base64
import datetime
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from http_message_signatures import (
    HTTPMessageSignaturesException,
    HTTPMessageSigner,
    HTTPMessageVerifier,
    MappingKeyResolver,
    algorithms,
)
from http_message_signatures.digests import ContentDigest
from http_sf.compat import Dictionary, InnerList, Item

from polite.core.identity import (
    CLOCK_SKEW_S,
    MAX_NONCE_CHARS,
    SIGNATURE_TAG,
    SIGNATURE_WINDOW_S,
    SignatureCheck,
    SignatureOutcome,
    okp_jwk,
    window_problem,
)
from polite.identity.keys import public_bytes

__all__ = ["LABEL", "KeyDirectory", "RequestSigner", "directory_signature_problem",
           "sign_directory", "signature_agent_url",
           "verify_signature"]

LABEL = "sig1"
DEFAULT_VALIDITY_S = 60  # a signed request is good for a minute: enough for slow queues
NONCE_BYTES = 64  # as Cloudflare's implementation draws and checks them


class _Fields:
    """The header view the library reads and writes: field lines in order, names as
    given; setting a name replaces every line of it."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self.pairs = list(pairs)

    def items(self) -> list[tuple[str, str]]:
        return list(self.pairs)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(name for name, _ in self.pairs))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(n.lower() == name.lower() for n, _ in self.pairs)

    def __getitem__(self, name: str) -> str:
        found = [v for n, v in self.pairs if n.lower() == name.lower()]
        if not found:
            raise KeyError(name)
        return ", ".join(found)

    def __setitem__(self, name: str, value: str) -> None:
        del self[name]
        self.pairs.append((name, value))

    def get(self, name: str) -> str | None:
        found = [v for n, v in self.pairs if n.lower() == name.lower()]
        return ", ".join(found) if found else None

    def __delitem__(self, name: str) -> None:
        self.pairs = [(n, v) for n, v in self.pairs if n.lower() != name.lower()]


@dataclass
class _Message:
    method: str
    url: str
    headers: _Fields


@dataclass
class _Answer:
    """A response, with the request it answers (for ``"@authority";req``)."""

    status_code: int
    headers: _Fields
    request: _Message


DIRECTORY_TAG = "http-message-signatures-directory"
DIRECTORY_VALIDITY_S = 300


class RequestSigner:
    """Signs requests with one Ed25519 key: ``Signature-Agent`` (when ``agent`` is given,
    the URL of the operator's key directory), ``Signature-Input`` and ``Signature``
    covering ``@authority`` and ``signature-agent``, with ``created``, ``expires``,
    ``keyid`` (the JWK thumbprint), ``alg``, a fresh ``nonce`` and ``tag="web-bot-auth"``."""

    def __init__(self, key: Ed25519PrivateKey, agent: str | None = None, *,
                 validity_s: int = DEFAULT_VALIDITY_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.key = key
        self.agent = agent
        self.keyid = str(okp_jwk(public_bytes(key))["kid"])
        self.validity_s = validity_s
        self._clock = clock
        self._signer = HTTPMessageSigner(
            signature_algorithm=algorithms.ED25519,
            key_resolver=MappingKeyResolver(public_keys={}, private_keys={self.keyid: key}))

    def headers(self, method: str, url: str,
                extra: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
        """The header fields to add to a ``method`` request for ``url``: ``extra`` (fields
        the signature must cover too, such as ``crawler-max-price``) and the signature's."""
        fields = list(extra)
        covered = ["@authority", *(name.lower() for name, _ in extra)]
        if self.agent is not None:
            # The dictionary form, keyed by the signature's label; the whole field is
            # covered, not the member alone ("signature-agent";key="sig1", as the working
            # group's draft has it): Cloudflare's web-bot-auth verifier (0.1.3) cannot
            # check a member component, and with one member the field's bytes are its.
            fields.append(("Signature-Agent", f'{LABEL}="{self.agent}"'))
            covered.append(_AGENT)
        created = int(self._clock())
        return self.sign(method, url, fields, covered, created=created,
                         expires=created + self.validity_s,
                         nonce=base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode())

    def sign(self, method: str, url: str, fields: Sequence[tuple[str, str]],
             covered: Sequence[str], *, created: int, expires: int | None,
             nonce: str | None, label: str = LABEL, tag: str | None = SIGNATURE_TAG,
             keyid: str | None = None) -> list[tuple[str, str]]:
        """``fields`` (the request's fields to cover, as sent) followed by
        ``Signature-Input`` and ``Signature`` for the ``covered`` components; ``keyid``
        defaults to the key's thumbprint."""
        message = _Fields(fields)
        keyid = keyid or self.keyid
        signer = self._signer if keyid == self.keyid else HTTPMessageSigner(
            signature_algorithm=algorithms.ED25519,
            key_resolver=MappingKeyResolver(public_keys={}, private_keys={keyid: self.key}))

        def at(when: int) -> datetime.datetime:
            return datetime.datetime.fromtimestamp(when, datetime.UTC)

        signer.sign(_Message(method.upper(), url, message), key_id=keyid, created=at(created),
                    expires=None if expires is None else at(expires), nonce=nonce,
                    label=label, tag=tag, include_alg=tag is not None,
                    covered_component_ids=list(covered))
        return message.pairs


_AGENT = "signature-agent"


def sign_directory(signers: Sequence[RequestSigner], url: str, body: bytes, *,
                   now: float | None = None) -> list[tuple[str, str]]:
    """``Content-Digest``, ``Signature-Input`` and ``Signature`` for the key directory
    ``body`` served for ``url``: one signature per key, labelled ``binding0``,
    ``binding1``..., over the request's ``@authority`` and the body's digest, tagged
    ``http-message-signatures-directory`` (the protocol draft's proof that whoever serves
    the directory holds its keys; the digest keeps the key set from being swapped under a
    captured signature)."""
    created = int(time.time() if now is None else now)
    digest = ContentDigest.create(body)
    inputs, signatures = [], []
    for index, signer in enumerate(signers):
        answer = _Answer(200, _Fields([("Content-Digest", digest)]),
                         _Message("GET", url, _Fields([])))
        signer._signer.sign(  # the signer's own key, keyid and algorithm
            answer, key_id=signer.keyid,
            created=datetime.datetime.fromtimestamp(created, datetime.UTC),
            expires=datetime.datetime.fromtimestamp(created + DIRECTORY_VALIDITY_S,
                                                    datetime.UTC),
            label=f"binding{index}", tag=DIRECTORY_TAG, include_alg=True,
            use_existing_digest=True,
            covered_component_ids=['"@authority";req', "content-digest"])
        fields = dict(answer.headers.pairs)
        inputs.append(fields["Signature-Input"])
        signatures.append(fields["Signature"])
    return [("Content-Digest", digest), ("Signature-Input", ", ".join(inputs)),
            ("Signature", ", ".join(signatures))]


def directory_signature_problem(url: str, headers: Iterable[tuple[str, str]],
                                keys: dict[str, bytes], body: bytes, *,
                                now: float) -> str | None:
    """Why a fetched directory's own signatures do not hold (``None`` when every key in it
    signed the answer ``body`` for ``url``'s authority, created by ``now`` and not expired).
    A directory that carries no such signature at all is taken (earlier drafts did not
    sign it): the caller decides. So is a signature that does not cover
    ``content-digest`` (earlier drafts covered ``@authority`` alone); one that does is
    checked against ``body``."""
    fields = _Fields(headers)
    if "signature-input" not in fields:
        return None
    inputs = Dictionary()
    try:
        inputs.parse(fields["signature-input"].encode("latin-1"))
    except Exception:
        return "its Signature-Input cannot be read"
    signed_by: dict[str, str] = {}
    for label, member in inputs.items():
        if isinstance(member, InnerList) and member.params.get("tag") == DIRECTORY_TAG:
            keyid = member.params.get("keyid")
            if not isinstance(keyid, str):
                return f"signature {label} has no keyid"
            # No cap on the validity here: the draft has directory signatures outlive
            # the lists that redistribute them, its own example by a century.
            problem = window_problem(member.params.get("created"),
                                     member.params.get("expires"), now,
                                     max_validity_s=2**62)
            if problem is not None:
                return f"signature {label}: {problem}"
            signed_by[keyid] = str(label)
    if not signed_by:
        return None
    missing = sorted(set(keys) - set(signed_by))
    if missing:
        return f"key {missing[0]} is listed but did not sign the directory"
    for keyid, label in signed_by.items():
        if keyid not in keys:
            return f"signed by {keyid}, which it does not list"
        verifier = HTTPMessageVerifier(
            signature_algorithm=algorithms.ED25519,
            key_resolver=MappingKeyResolver(
                public_keys={keyid: Ed25519PublicKey.from_public_bytes(keys[keyid])},
                private_keys={}))
        verifier.max_clock_skew = datetime.timedelta(days=365 * 100)  # checked above
        answer = _Answer(200, fields, _Message("GET", url, _Fields([])))
        digested = any(str(c.value) == "content-digest" for c in inputs[label])
        try:
            verifier.verify(answer, max_age=None, expect_tag=DIRECTORY_TAG,
                            expect_label=label, require_components=('"@authority";req',),
                            body=body if digested else None)
        except HTTPMessageSignaturesException as exc:
            return f"signature {label} does not verify: {exc or type(exc).__name__}"
    return None


@dataclass(frozen=True, slots=True)
class KeyDirectory:
    """A fetched key directory: its Ed25519 keys by thumbprint, or why it could not be
    had (``error``)."""

    keys: dict[str, bytes]
    error: str | None = None


Lookup = Callable[[str], Awaitable[KeyDirectory]]


def _tagged(fields: _Fields) -> tuple[str, InnerList] | None:
    if "signature-input" not in fields:
        return None
    inputs = Dictionary()
    try:
        inputs.parse(fields["signature-input"].encode("latin-1"))
    except Exception:  # the parser raises bare ValueErrors and worse on garbage
        return None
    for label, member in inputs.items():
        if isinstance(member, InnerList) and member.params.get("tag") == SIGNATURE_TAG:
            return str(label), member
    return None


def signature_agent_url(value: str | None, label: str, *, exact: bool = False) -> str | None:
    """The directory URL ``Signature-Agent`` names for the signature ``label``: the
    dictionary member of that label (or, unless ``exact``, the only member), or the field
    as a plain string (earlier drafts). A member with parameters names nothing (the
    protocol draft has verifiers ignore it)."""
    if not value:
        return None
    raw = value.encode("latin-1", "replace")
    members = Dictionary()
    try:
        members.parse(raw)
    except Exception:
        members = Dictionary()
    if len(members):
        member: Any = members.get(label) if label in members else (
            next(iter(members.values())) if len(members) == 1 and not exact else None)
        if isinstance(member, Item) and isinstance(member.value, str) and not member.params:
            return member.value
        return None
    item = Item()
    try:
        item.parse(raw)
    except Exception:
        return None
    return item.value if isinstance(item.value, str) else None


async def verify_signature(method: str, url: str, headers: Iterable[tuple[str, str]],
                           lookup: Lookup, *, now: float | None = None,
                           skew_s: float = CLOCK_SKEW_S,
                           max_validity_s: int = SIGNATURE_WINDOW_S,
                           require_nonce: bool = False,
                           authority_problem: Callable[[str], str | None] | None = None
                           ) -> SignatureCheck:
    """The outcome of the Web Bot Auth signature on a request for ``url`` (scheme and
    authority as the site was reached), the key looked up in the directory that
    ``Signature-Agent`` names through ``lookup``. ``authority_problem``: why the
    request's authority is not the verifier's own (``None`` when it is), asked before any
    directory is looked up; ``require_nonce``: a signature without a nonce is not checked
    (it could be a replay of a request seen within its window)."""
    fields = _Fields(headers)
    found = _tagged(fields)
    if found is None:
        # Signed for some other purpose, it makes no claim of a robot's identity; with a
        # Signature-Agent it does, and the claim does not hold.
        if "signature-input" in fields and _AGENT in fields:
            return SignatureCheck(SignatureOutcome.INVALID,
                                  f'no signature tagged "{SIGNATURE_TAG}" could be read')
        return SignatureCheck(SignatureOutcome.ABSENT, "not signed for Web Bot Auth")
    label, member = found
    params = member.params
    keyid = params.get("keyid")
    if not isinstance(keyid, str):
        return SignatureCheck(SignatureOutcome.INVALID, "the signature has no keyid")
    problem = window_problem(params.get("created"), params.get("expires"),
                             time.time() if now is None else now, skew_s=skew_s,
                             max_validity_s=max_validity_s)
    if problem is not None:
        return SignatureCheck(SignatureOutcome.INVALID, problem, keyid=keyid)
    nonce = params.get("nonce")
    if nonce is not None and (not isinstance(nonce, str) or len(nonce) > MAX_NONCE_CHARS):
        return SignatureCheck(SignatureOutcome.INVALID, f"its nonce is not a string of at "
                                                        f"most {MAX_NONCE_CHARS} characters",
                              keyid=keyid)
    if nonce is None and require_nonce:
        return SignatureCheck(SignatureOutcome.UNVERIFIABLE,
                              "it has no nonce, so a replay of a request seen within its "
                              "window could not be told apart: not checked", keyid=keyid)
    covered = [(str(c.value), dict(c.params)) for c in member]
    # The signature must be bound to the site: by its authority or its whole target URI.
    bound = [name for name in ("@authority", "@target-uri") if (name, {}) in covered]
    if not bound:
        return SignatureCheck(SignatureOutcome.INVALID,
                              "neither @authority nor @target-uri is covered", keyid=keyid)
    try:
        parts = urlsplit(url)
        authority = parts.netloc if parts.port is not None or parts.hostname else ""
    except ValueError:  # a Host such as "[" or "x:99999"
        authority = ""
    if not authority:
        return SignatureCheck(SignatureOutcome.INVALID, f"the request's authority in {url!r} "
                              "cannot be read", keyid=keyid)
    if authority_problem is not None:
        problem = authority_problem(authority)
        if problem is not None:
            return SignatureCheck(SignatureOutcome.INVALID, problem, keyid=keyid)
    agent_covered = [params for name, params in covered if name == _AGENT]
    if _AGENT in fields and not agent_covered:
        return SignatureCheck(SignatureOutcome.INVALID, "Signature-Agent is not covered",
                              keyid=keyid)
    # The member the signature covers (its ``key``), else (the whole field covered) the one
    # named like the label: never a member the signature does not cover.
    exact = bool(agent_covered) and "key" in agent_covered[0]
    member_key = agent_covered[0].get("key", label) if agent_covered else label
    agent = signature_agent_url(fields.get(_AGENT), str(member_key), exact=exact)
    if agent is None and exact:
        return SignatureCheck(SignatureOutcome.INVALID, "the Signature-Agent member "
                              f"{member_key!r} it covers is not there, or not a URL",
                              keyid=keyid)
    if agent is None:
        return SignatureCheck(SignatureOutcome.UNVERIFIABLE,
                              "no Signature-Agent naming a key directory", keyid=keyid)
    if urlsplit(agent).scheme not in ("https", "http"):
        return SignatureCheck(SignatureOutcome.INVALID, f"Signature-Agent {agent!r} is not "
                              "an http(s) URL", agent, keyid)
    directory = await lookup(agent)
    if directory.error is not None:
        return SignatureCheck(SignatureOutcome.UNVERIFIABLE,
                              f"key directory {agent}: {directory.error}", agent, keyid)
    key = directory.keys.get(keyid)
    if key is None:
        return SignatureCheck(SignatureOutcome.INVALID,
                              f"key {keyid} is not in the directory {agent}", agent, keyid)
    verifier = HTTPMessageVerifier(
        signature_algorithm=algorithms.ED25519,
        key_resolver=MappingKeyResolver(
            public_keys={keyid: Ed25519PublicKey.from_public_bytes(key)}, private_keys={}))
    # The window was checked above, against the caller's clock and with its skew.
    verifier.max_clock_skew = datetime.timedelta(days=365 * 100)
    try:
        verifier.verify(_Message(method.upper(), url, fields), max_age=None,
                        expect_tag=SIGNATURE_TAG, expect_label=label,
                        require_components=bound[:1])
    except HTTPMessageSignaturesException as exc:
        why = str(exc) or type(exc).__name__
        return SignatureCheck(SignatureOutcome.INVALID, f"signature does not verify: {why}",
                              agent, keyid)
    return SignatureCheck(SignatureOutcome.VERIFIED, f"signed by {keyid} from {agent}",
                          agent, keyid, nonce, params.get("expires"))
