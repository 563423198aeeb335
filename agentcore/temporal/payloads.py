"""Large payloads live in a directory beside the sessions, not in the workflow history.

Temporal refuses a payload over 2 MB, and a workflow task that tries to send one fails again on every
retry: a turn whose tool results add up to more than that (six 500 KB outputs, say) would otherwise
wedge its conversation for good. With :func:`with_payload_store`, every payload of at least
``PAYLOAD_STORE_BYTES`` that workers exchange through the server (activity inputs and results, the
local activities' markers, the signals activities send) is written to ``<directory>/<hash>`` and the
history holds a small reference to it (Temporal's external storage; the SDK reads the reference back
transparently). Workers must share the directory, as they share the sessions directory; by default
it is ``<sessions_dir>/.payloads``.

Files are named by the SHA-256 of what they hold: storing the same payload twice writes one file, a
retried activity finds its payload in place, and a file that does not match its name is refused
rather than handed to a workflow. Nothing deletes them: a file may be read by any replay of the
history that references it, so remove the ones older than your namespace's retention period.

What a workflow answers to clients (update results: event polls, prompt outcomes; query answers) is
never stored there: a client need not reach the directory. Those answers are kept small by the
workflow itself (see ``agentcore.budget``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverSelectContext,
    StorageDriverStoreContext,
)

# Temporal warns about payloads over 512 KB and refuses them over 2 MB (a whole workflow task's
# commands: 4 MB). A quarter of a megabyte keeps every history event small.
PAYLOAD_STORE_BYTES = 256 * 1024
PAYLOADS_SUBDIR = ".payloads"
DRIVER_NAME = "agentcore-directory"  # don't rename: recorded in histories


class PayloadStoreError(RuntimeError):
    """A stored payload is missing or does not match its reference."""


class DirectoryPayloadStore(StorageDriver):
    """A ``StorageDriver`` writing each payload to ``<directory>/<sha256>``, once."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def name(self) -> str:
        return DRIVER_NAME

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        blobs = [payload.SerializeToString(deterministic=True) for payload in payloads]
        return await asyncio.to_thread(self._write_all, blobs)

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(
            self._read_all, [claim.claim_data.get("sha256", "") for claim in claims]
        )

    def _write_all(self, blobs: list[bytes]) -> list[StorageDriverClaim]:
        self.directory.mkdir(parents=True, exist_ok=True)
        claims = []
        for blob in blobs:
            digest = hashlib.sha256(blob).hexdigest()
            target = self.directory / digest
            if not target.exists():
                # Written whole under a temporary name, synced, then renamed: a reader never sees
                # part of a file, and two workers storing the same payload both succeed.
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(blob)
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(tmp, target)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            claims.append(StorageDriverClaim(claim_data={"sha256": digest, "bytes": str(len(blob))}))
        return claims

    def _read_all(self, digests: list[str]) -> list[Payload]:
        payloads = []
        for digest in digests:
            if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
                raise PayloadStoreError(f"not a stored payload's reference: {digest!r}")
            path = self.directory / digest
            try:
                blob = path.read_bytes()
            except FileNotFoundError:
                raise PayloadStoreError(
                    f"stored payload {digest} is not in {self.directory}: every worker needs the same "
                    "payloads directory (create_worker(payloads_dir=...); default <sessions_dir>/.payloads)"
                ) from None
            if hashlib.sha256(blob).hexdigest() != digest:
                raise PayloadStoreError(f"stored payload {path} does not match its hash")
            payload = Payload()
            payload.ParseFromString(blob)
            payloads.append(payload)
        return payloads


def payload_store(directory: str | Path, *, threshold: int = PAYLOAD_STORE_BYTES) -> ExternalStorage:
    """External storage in ``directory`` for payloads of ``threshold`` bytes and more."""
    driver = DirectoryPayloadStore(directory)

    def select(context: StorageDriverSelectContext, payload: Payload) -> StorageDriver | None:
        # agentcore's workflow runner gives update results and query answers no target (see
        # ``agentcore.temporal.runner``); whatever goes to a workflow or an activity has one.
        return driver if context.target is not None else None

    select.agentcore_payload_store = True  # type: ignore[attr-defined]
    return ExternalStorage(drivers=[driver], driver_selector=select, payload_size_threshold=threshold)


def with_payload_store(converter: DataConverter, directory: str | Path | None) -> DataConverter:
    """``converter`` storing large payloads in ``directory`` (None: as it is)."""
    if directory is None:
        return converter
    current = converter.external_storage
    if current is not None and _directory_of(current) == Path(directory):
        return converter
    return dataclasses.replace(converter, external_storage=payload_store(directory))


def _directory_of(storage: ExternalStorage) -> Path | None:
    drivers = list(storage.drivers)
    if len(drivers) == 1 and isinstance(drivers[0], DirectoryPayloadStore):
        return drivers[0].directory
    return None


def is_directory_store(storage: ExternalStorage | None) -> bool:
    """True for storage made by :func:`payload_store` (its selector reads only whether there is a target)."""
    return storage is not None and getattr(storage.driver_selector, "agentcore_payload_store", False)
