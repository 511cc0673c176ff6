"""sbx for Python rollout code: the reference's sandbox layer (providers, transfer, session)
on libsbx, driven from the asyncio event loop. See docs/python.md."""
from ._lib import lib as _lib_handle
from .errors import (SandboxProbeError, SandboxProtocolError, SandboxTransferError,
                     SandboxUnavailableError, SandboxUsageError, SbxError)
from .providers import (AsyncSandbox, SandboxCreateError, SandboxCreateVerificationError,
                        SandboxEndpoint, SandboxExecResult, SandboxHandle, SandboxResources,
                        SandboxPtySpec, SandboxSpec, SandboxStatus, SbxProvider)
from .pty import PtySession, SandboxPtyError

__version__ = _lib_handle.sbx_version().decode()
