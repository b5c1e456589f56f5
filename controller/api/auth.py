"""Bearer-token authentication of the REST API (``controller.auth`` in the config).

:func:`load_tokens` checks each configured token's secret once, at start (a placeholder such as
``${env:NAME}`` or ``${file:PATH}`` was resolved when the config was loaded). :class:`TokenChecker`
decides per request:

- no ``Authorization: Bearer`` header, or a token no entry has: :class:`Unauthorized` (401);
- a ``read`` token on a write: :class:`Forbidden` (403);
- otherwise the request goes on, and the caller knows the token's *name* (never its secret).

Every secret is compared with :func:`hmac.compare_digest`, and against every entry, so the
time taken does not tell how much of a guess was right nor which entry it nearly matched.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass, field

from ferry.common.config import RestAuthConfig
from ferry.common.errors import ConfigError
from ferry.controller.errors import Forbidden, Unauthorized

# RFC 6750 b64token, and long enough not to be guessed.
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class Token:
    name: str
    role: str
    # repr=False: a Token printed or logged never shows its secret.
    secret: bytes = field(repr=False)


def load_tokens(config: RestAuthConfig) -> list[Token]:
    """Resolves every token's secret; a missing, short or malformed one raises :class:`ConfigError`
    (the message names the token, never its secret)."""
    tokens: list[Token] = []
    for entry in config.tokens:
        secret = entry.value.get_secret_value().strip()
        if len(secret) < MIN_TOKEN_LENGTH or not _TOKEN_CHARS.match(secret):
            raise ConfigError(
                f"controller.auth: token {entry.name!r} must be at least {MIN_TOKEN_LENGTH} characters of "
                "letters, digits and -._~+/ (e.g. `openssl rand -hex 24`)"
            )
        if any(hmac.compare_digest(secret.encode(), known.secret) for known in tokens):
            raise ConfigError(f"controller.auth: token {entry.name!r} has the same secret as another token")
        tokens.append(Token(entry.name, entry.role, secret.encode()))
    return tokens


class TokenChecker:
    """Decides whether a request may go on; stateless once built."""

    def __init__(self, tokens: list[Token], open_reads: bool) -> None:
        self.tokens = tokens
        self.open_reads = open_reads

    @classmethod
    def from_config(cls, config: RestAuthConfig) -> TokenChecker:
        return cls(load_tokens(config), config.open_reads)

    def _match(self, presented: bytes) -> Token | None:
        found = None
        for token in self.tokens:  # no early exit: every entry costs the same
            if hmac.compare_digest(presented, token.secret):
                found = token
        return found

    def check(self, authorization: str | None, write: bool) -> Token | None:
        """The token allowing this request (None for an open read), or raises 401/403."""
        if not write and self.open_reads:
            return None
        if not authorization:
            raise Unauthorized("this request needs a bearer token (Authorization: Bearer <token>)")
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise Unauthorized("the Authorization header must be 'Bearer <token>'")
        token = self._match(presented.strip().encode("utf-8", "replace"))
        if token is None:
            raise Unauthorized("the bearer token is not valid", invalid_token=True)
        if write and token.role != "write":
            raise Forbidden(f"token {token.name!r} may only read; this request changes Ferry's state")
        return token
