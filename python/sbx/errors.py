"""The errors of the package, one per class of libsbx's struct sbx_err (shared/err.h).

The wire's `transfer`, `probe` and `unavailable` classes are the reference's three transfer
errors; `protocol` (a peer that broke the protocol: a corrupt channel or an impostor agent) is
an outage too, so it derives from SandboxUnavailableError; `usage` (a bad request from the
caller) is a ValueError.
"""


class SbxError(Exception):
    """Base of every error libsbx reports; `cls` is the wire's class name, `errno` the errno."""

    cls = "unknown"

    def __init__(self, message, errno=0):
        super().__init__(message)
        self.errno = errno


class SandboxTransferError(SbxError, RuntimeError):
    """A transfer command failed inside the sandbox."""

    cls = "transfer"


class SandboxProbeError(SbxError, RuntimeError):
    """The sandbox could not answer a probe or run a command (lost container, provider timeout).

    Not a SandboxTransferError: an outage is never read as "the agent wrote nothing"."""

    cls = "probe"


class SandboxUnavailableError(SbxError, RuntimeError):
    """The provider could not run the operation at all (a timeout, a lost sandbox, a cut
    channel): Gym's outage, retryable, never a property of the task."""

    cls = "unavailable"


class SandboxProtocolError(SandboxUnavailableError):
    """The agent's side broke the protocol: nothing it said is used."""

    cls = "protocol"


class SandboxUsageError(SbxError, ValueError):
    """A bad request from the caller (a path that is not absolute, an unknown runner, ...)."""

    cls = "usage"


BY_CLASS = {1: SandboxTransferError, 2: SandboxProbeError, 3: SandboxUnavailableError,
            4: SandboxProtocolError, 5: SandboxUsageError}


def from_err(err, prefix=None):
    """The exception for a filled struct sbx_err."""
    cls = BY_CLASS.get(err.cls, SandboxUnavailableError)
    msg = err.text()
    return cls(prefix + ": " + msg if prefix else msg, err.errnum)
