"""The Web Bot Auth key directory, served where a signing crawler's ``Signature-Agent``
points verifiers."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from polite.core.identity import DIRECTORY_MEDIA_TYPE, DIRECTORY_PATH

__all__ = ["DIRECTORY_MAX_AGE_S", "directory_route"]

# Verifiers cache the directory this long; a key that is rotated out stays listed at least
# as long, so that requests it signed still verify.
DIRECTORY_MAX_AGE_S = 3600


def directory_route(document: bytes,
                    sign: Callable[[str], list[tuple[str, str]]] | None = None) -> Route:
    """``GET`` (and ``HEAD``) of :data:`DIRECTORY_PATH`, answering ``document``; ``sign``
    gives the fields that sign the answer for the URL asked (each key's proof that the
    directory's server holds it)."""

    async def directory(request: Request) -> Response:
        headers = {"cache-control": f"max-age={DIRECTORY_MAX_AGE_S}"}
        if sign is not None:
            headers.update(sign(str(request.url)))
        return Response(document, media_type=DIRECTORY_MEDIA_TYPE, headers=headers)

    return Route(DIRECTORY_PATH, directory, methods=["GET"])
