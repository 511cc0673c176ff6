"""Fixtures of the Python package's tests: real sandboxes on the ns runner (BusyBox, Debian,
the shell-less image), removed after each test. tests/run.sh runs these with the first
python3 on PATH and PYTHONPATH=python (Debian's pytest added when that python3 lacks it)."""
import os
import pathlib
import subprocess
import sys

import pytest

TOP = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "python"))

from sbx import AsyncSandbox, SandboxSpec, SbxProvider  # noqa: E402

SBX = os.environ.get("SBX_CLI", str(TOP / "build" / "host" / "sbx"))


RUNNER = os.environ.get("SBX_PY_RUNNER", "ns")
needs_ns = pytest.mark.skipif(RUNNER != "ns", reason="an ns-runner test (SBX_PY_RUNNER=%s)"
                              % RUNNER)


@pytest.fixture
def provider():
    return SbxProvider(runner=RUNNER)


@pytest.fixture
async def sandbox(provider):
    sb = await AsyncSandbox.create(provider, SandboxSpec(image="busybox"))
    yield sb
    await sb.close()


@pytest.fixture
async def debian(provider):
    sb = await AsyncSandbox.create(provider, SandboxSpec(image="debian"))
    yield sb
    await sb.close()


def sandbox_exists(spec):
    """Asks the sbx command (another process), so no state of this one is trusted."""
    out = subprocess.run([SBX, "sandbox", "status", spec],
                         capture_output=True, text=True)
    return out.returncode == 0


def reachable_by(uid, path):
    """Whether every folder above path lets uid through (a clone under a 0700 temporary
    folder does not let another user reach the package)."""
    p = pathlib.Path(path).resolve()
    for d in [p] + list(p.parents):
        st = d.stat()
        bit = 0o100 if st.st_uid == uid else 0o001
        if not st.st_mode & bit:
            return False
    return True


def run_python(code, *args, user=None, timeout=60):
    """code in a second python3 process with the package importable; its CompletedProcess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TOP / "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-c", code, *args]
    if user is not None:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
