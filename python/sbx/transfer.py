"""Sandbox transfer helpers (the reference's nemo_gym.sandbox.transfer) on libsbx.

Trees move as pax archives over the sandbox's retained connection: the agent packs and
unpacks in the sandbox as root (placement by folder fds, exact modes and owners), the host
unpacks downloads into a private staging folder and commits it only when the stream's SHA-256
matches (docs/transfers.md). No shell and no tar are needed in the image. Same parameters,
defaults and return values as the reference; what differs is in docs/python.md.
"""
import logging
import pathlib

from .errors import SandboxProbeError, SandboxTransferError, SandboxUnavailableError
from .providers import AsyncSandbox, SandboxExecResult

LOGGER = logging.getLogger(__name__)

TRANSFER_USER = "root"

__all__ = ["upload_dir", "download_dir", "download_path", "upload_path", "upload_archive",
           "remote_kind", "exec_as_root", "tar_extract_command", "TRANSFER_USER",
           "SandboxTransferError", "SandboxProbeError", "SandboxUnavailableError"]


async def upload_dir(sandbox: AsyncSandbox, source: pathlib.Path, target: str,
                     timeout_s: float = 600, make_readable: bool = False) -> None:
    """Copy the contents of `source` into `target` inside the sandbox (created when missing,
    merged into an existing folder). Modes travel; `make_readable` adds a+rX."""
    conn = await sandbox.connection()
    await conn.upload("dir", source, target, timeout_s=timeout_s, make_readable=make_readable)


async def download_dir(sandbox: AsyncSandbox, source: str, target: pathlib.Path,
                       timeout_s: float = 600, names: tuple[str, ...] | None = None,
                       skip_unsafe: bool = False, links: str = "data",
                       exclude: tuple[str, ...] = (),
                       archive_copy: pathlib.Path | None = None) -> None:
    """Copy the contents of `source` inside the sandbox into the local `target` folder.

    `links="data"` refuses links that leave the root and strips set-id bits; `"keep"` keeps
    symlinks wherever they point. `exclude` is GNU tar's unanchored `--exclude`. The
    `archive_copy` stays only when the host copy was accepted."""
    conn = await sandbox.connection()
    await conn.download("dir", source, target, timeout_s=timeout_s, names=names,
                        skip_unsafe=skip_unsafe, links=links, exclude=exclude,
                        archive_copy=archive_copy)


async def download_path(sandbox: AsyncSandbox, source: str, target: pathlib.Path,
                        timeout_s: float = 600, links: str = "data",
                        exclude: tuple[str, ...] = (),
                        archive_copy: pathlib.Path | None = None) -> str | None:
    """Copy a file or directory out of the sandbox; returns "file" or "dir", or None when
    absent (nothing written). A file keeps its mode bits (set-id stripped)."""
    conn = await sandbox.connection()
    kind, _ = await conn.download("path", source, target, timeout_s=timeout_s, links=links,
                                  exclude=exclude, archive_copy=archive_copy)
    return kind


async def upload_path(sandbox: AsyncSandbox, source: pathlib.Path, target: str,
                      timeout_s: float = 600) -> None:
    """Restore a collected file or directory at `target`: a folder replaces what is there
    (atomically) and is made world-writable; a file lands in its parent, created
    world-writable when missing, an existing parent opened to all where the sandbox allows."""
    conn = await sandbox.connection()
    await conn.upload("path", source, target, timeout_s=timeout_s)


async def upload_archive(sandbox: AsyncSandbox, archive: pathlib.Path, kind: str, target: str,
                         timeout_s: float = 600, keep_out: tuple[str, ...] = ()) -> bool:
    """Restore at `target` the archive a download kept (`archive_copy`), byte for byte.

    The folder it would extract into is resolved in the sandbox first: diverted into, above
    or at a `keep_out` folder, nothing is touched, a warning is logged and False returned.
    True once the archive is extracted."""
    conn = await sandbox.connection()
    landed, warning, _ = await conn.upload_archive(archive, kind, target, keep_out=keep_out,
                                                   timeout_s=timeout_s)
    if not landed:
        LOGGER.warning("upload_archive %s: %s", target, warning or "diverted")
    return landed


async def remote_kind(sandbox: AsyncSandbox, path: str) -> str | None:
    """"dir", "file" or None for a path inside the sandbox (following links, as `[ -d ]`).
    Only an answer counts as absence: a probe the sandbox could not answer raises
    SandboxProbeError, a lost connection SandboxUnavailableError."""
    conn = await sandbox.connection()
    return await conn.kind(path)


async def exec_as_root(sandbox: AsyncSandbox, command: str,
                       timeout_s: float) -> SandboxExecResult:
    """Run `command` as root, or as the default user when the sandbox cannot switch users
    (the agent falls back and says so; no marker strings are parsed)."""
    return await sandbox.exec(command, timeout_s=timeout_s, user=TRANSFER_USER)


def tar_extract_command(remote: str, target: str) -> str:
    """The reference's shell line for tar. sbx has none: archives are unpacked by the agent
    itself, without a shell or tar in the image (docs/python.md)."""
    raise NotImplementedError(
        "tar_extract_command: sbx unpacks archives in its agent, with no shell and no tar in "
        "the sandbox, so there is no shell line; upload the archive with upload_archive")
