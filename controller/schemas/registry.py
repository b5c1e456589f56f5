"""The one place that talks HTTP to schema registries (Apicurio Registry 2.x).

Reads go through the Confluent-compatible API (``/apis/ccompat/v7``): subjects, their versions,
the schema behind an ID. Writes go through Apicurio's own admin API, because the
Confluent-compatible one cannot register a schema under a chosen ID (``PUT /mode`` IMPORT is
"not supported" and an ``id`` in the body is ignored): :meth:`RegistryClient.export_zip` gives
the primary's registrations, :func:`import_zip_for` keeps the versions to copy under their
target subject names, and :meth:`RegistryClient.import_zip` loads them into a target with
their schema IDs. An import whose ID the target already uses for another schema still answers
204 and attaches the subject to the wrong schema (or imports nothing), so the distributor
checks every ID on the target first (:meth:`RegistryClient.schema_by_id`) and reads every copied
version back afterwards.

Temporary failures (connection refused, timeouts, 5xx) retry with backoff until the client's
deadline, then raise :class:`RegistryUnavailable`; other refusals raise :class:`RegistryRefused`
at once.
"""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import requests

from ferry.common.config import RegistryConfig
from ferry.controller.errors import ControllerError, Unavailable

CCOMPAT = "/apis/ccompat/v7"
ADMIN = "/apis/registry/v2/admin"
ARTIFACTS = "/apis/registry/v2/groups/default/artifacts"  # the ccompat API's subjects live in group default
_JSON = "application/vnd.schemaregistry.v1+json"


class RegistryUnavailable(Unavailable):
    """A registry did not answer (in time); worth retrying later (503)."""


class RegistryRefused(ControllerError):
    """A registry refused a request for good (a 4xx other than not-found)."""

    status = 502


@dataclass(frozen=True)
class RegisteredVersion:
    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str


@dataclass(frozen=True)
class VersionCopy:
    """A primary subject version to put on a target under ``target_subject``."""

    subject: str
    version: int
    target_subject: str


class RegistryClient:
    """One registry. ``name`` is its cluster's name (for messages)."""

    def __init__(
        self,
        *,
        name: str,
        config: RegistryConfig,
        session: requests.Session | None = None,
        retry_deadline_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.url = config.base_url
        self._timeout = config.timeout_s
        self._deadline_s = retry_deadline_s if retry_deadline_s is not None else 2 * config.timeout_s
        self._clock = clock
        self._sleep = sleep
        self._session = session or requests.Session()
        if config.auth is not None:
            self._session.auth = (config.auth.username, config.auth.password.get_secret_value())

    def close(self) -> None:
        self._session.close()

    # -- HTTP with retries -------------------------------------------------------------------

    def _request(self, method: str, path: str, *, missing_ok: bool = False, **kwargs: Any) -> requests.Response | None:
        """The answer; None for a 404 when ``missing_ok``. Retries temporary failures until the deadline."""
        give_up = self._clock() + self._deadline_s
        delay = 0.2
        while True:
            problem: str
            try:
                answer = self._session.request(method, self.url + path, timeout=self._timeout, **kwargs)
            except requests.RequestException as exc:
                problem = type(exc).__name__
            else:
                if answer.status_code < 400:
                    return answer
                if answer.status_code == 404 and missing_ok:
                    return None
                if answer.status_code < 500 and answer.status_code != 429:
                    raise RegistryRefused(
                        f"registry of {self.name} ({self.url}) refused {method} {path}: "
                        f"{answer.status_code} {answer.text[:200]}"
                    )
                problem = f"HTTP {answer.status_code}"
            if self._clock() + delay > give_up:
                raise RegistryUnavailable(
                    f"registry of {self.name} ({self.url}) did not answer {method} {path}: {problem}"
                )
            self._sleep(delay)
            delay = min(delay * 2, 2.0)

    def _json(self, path: str, missing_ok: bool = False) -> Any:
        accept = _JSON if path.startswith(CCOMPAT) else "application/json"
        answer = self._request("GET", path, missing_ok=missing_ok, headers={"Accept": accept})
        return None if answer is None else answer.json()

    # -- reads (Confluent-compatible API) ---------------------------------------------------

    def subjects(self) -> list[str]:
        """Every subject, soft-deleted ones included (their versions are DISABLED, see :meth:`states`)."""
        subjects = self._json(f"{CCOMPAT}/subjects?deleted=true")
        return sorted(str(s) for s in subjects)

    def states(self, subject: str) -> dict[int, str]:
        """Version -> state (ENABLED, DISABLED: soft-deleted, DEPRECATED) through Apicurio's own
        API, which the Confluent-compatible one does not show; {} when the subject does not exist."""
        states: dict[int, str] = {}
        offset, page = 0, 500
        while True:
            found = self._json(f"{ARTIFACTS}/{_quote(subject)}/versions?offset={offset}&limit={page}", missing_ok=True)
            entries = (found or {}).get("versions", [])
            for entry in entries:
                if str(entry.get("version", "")).isdigit():
                    states[int(entry["version"])] = str(entry.get("state", "ENABLED"))
            offset += len(entries)
            if not entries or offset >= int((found or {}).get("count", 0)):
                return states

    def set_state(self, subject: str, version: int, state: str) -> None:
        self._request("PUT", f"{ARTIFACTS}/{_quote(subject)}/versions/{version}/state", json={"state": state})

    def versions(self, subject: str) -> list[int]:
        """The subject's live versions (soft-deleted ones are not listed); [] when it does not exist."""
        found = self._json(f"{CCOMPAT}/subjects/{_quote(subject)}/versions", missing_ok=True)
        return sorted(int(v) for v in found or [])

    def version(self, subject: str, version: int) -> RegisteredVersion | None:
        found = self._json(f"{CCOMPAT}/subjects/{_quote(subject)}/versions/{version}", missing_ok=True)
        if found is None:
            return None
        return RegisteredVersion(
            subject,
            int(found["version"]),
            int(found["id"]),
            str(found["schema"]),
            str(found.get("schemaType") or "AVRO"),
        )

    def schema_by_id(self, schema_id: int) -> tuple[str, str] | None:
        """(schema, type) registered under ``schema_id``; None when the ID is free."""
        found = self._json(f"{CCOMPAT}/schemas/ids/{schema_id}", missing_ok=True)
        if found is None:
            return None
        return str(found["schema"]), str(found.get("schemaType") or "AVRO")

    def has_content(self, content_hash: str) -> bool:
        """Whether the registry holds content with this hash (under whatever ID)."""
        found = self._request("GET", f"/apis/registry/v2/ids/contentHashes/{content_hash}", missing_ok=True)
        return found is not None

    # -- export and import (Apicurio admin API) ---------------------------------------------

    def export_zip(self) -> bytes:
        answer = self._request("GET", f"{ADMIN}/export", headers={"Accept": "application/zip"})
        assert answer is not None
        return answer.content

    def import_zip(self, data: bytes) -> None:
        # Content IDs (the Confluent-compatible schema IDs) are kept either way. Global IDs (one
        # per version, Apicurio's own) are the target's business: preserving the primary's would
        # make the import skip, silently, every version whose global ID the target already used.
        # Without preservation a content ID the target uses for another schema would be reused
        # for it: the distributor has checked every ID before, and reads every copy back after.
        self._request(
            "POST",
            f"{ADMIN}/import",
            data=data,
            headers={"Content-Type": "application/zip", "X-Registry-Preserve-GlobalId": "false"},
        )


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def content_hashes(export: bytes) -> dict[tuple[str, int], str]:
    """(subject, version) -> the hash of its content, from an export."""
    with zipfile.ZipFile(io.BytesIO(export)) as source:
        by_id: dict[int, str] = {}
        versions: dict[tuple[str, int], int] = {}
        for name in source.namelist():
            if name.startswith("content/") and name.endswith(".Content.json"):
                entry = json.loads(source.read(name))
                by_id[int(entry["contentId"])] = str(entry["contentHash"])
            elif name.startswith("groups/") and name.endswith(".ArtifactVersion.json"):
                entry = json.loads(source.read(name))
                if str(entry.get("version", "")).isdigit():
                    versions[(str(entry["artifactId"]), int(entry["version"]))] = int(entry["contentId"])
    return {key: by_id[cid] for key, cid in versions.items() if cid in by_id}


def import_zip_for(export: bytes, copies: Iterable[VersionCopy]) -> bytes:
    """An import file holding only ``copies``, renamed to their target subjects, in order.

    Apicurio's export layout: ``groups/default/artifacts/<subject>/versions/<n>.ArtifactVersion.json``
    (with ``artifactId`` and ``contentId``) and ``content/<hash>.Content.json`` / ``.Content.data``.
    """
    with zipfile.ZipFile(io.BytesIO(export)) as source:
        names = source.namelist()
        contents: dict[int, str] = {}
        for name in names:
            if name.startswith("content/") and name.endswith(".Content.json"):
                contents[int(json.loads(source.read(name))["contentId"])] = name
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
            for name in names:
                if name.startswith("manifest"):
                    target.writestr(name, source.read(name))
            written: set[str] = set()
            entries: list[tuple[str, bytes]] = []
            for copy in copies:
                path = f"groups/default/artifacts/{copy.subject}/versions/{copy.version}.ArtifactVersion.json"
                try:
                    entry = json.loads(source.read(path))
                except KeyError:
                    raise RegistryRefused(
                        f"the primary's export has no {copy.subject} version {copy.version}"
                    ) from None
                entry["artifactId"] = copy.target_subject
                content = contents.get(int(entry["contentId"]))
                if content is None:
                    raise RegistryRefused(f"the primary's export has no content {entry['contentId']}")
                if content not in written:  # content before the versions that use it
                    written.add(content)
                    target.writestr(content, source.read(content))
                    data = content[: -len(".json")] + ".data"
                    target.writestr(data, source.read(data))
                entries.append(
                    (
                        f"groups/default/artifacts/{copy.target_subject}/versions/{copy.version}.ArtifactVersion.json",
                        json.dumps(entry).encode(),
                    )
                )
            for name, payload in entries:
                target.writestr(name, payload)
    return out.getvalue()
