"""sbx.session: SandboxSession's rules on real supervised runs."""
import asyncio
import time

import pytest

from sbx import SandboxTransferError, SandboxUnavailableError, SandboxUsageError
from sbx.session import (HARNESS_COMMAND_NOT_STARTED, HARNESS_RUNNER_FAILED,
                         ExpiryUnsupportedError, SandboxCommand, SandboxSession,
                         shell_assignments)
from conftest import sandbox_exists


def argv(*words):
    async def stage():
        return SandboxCommand(list(words))
    return stage


async def test_execute_collects_once_after_a_witnessed_termination(sandbox):
    hs = SandboxSession(sandbox, "/tmp/.h1", "/tmp", "demo")
    calls = []

    async def collect():
        calls.append(hs.cleanup_confirmed)
        return "artifacts"

    await hs.execute(argv("/bin/sh", "-c",
                          "echo out; setsid sh -c 'sleep 100' </dev/null >/dev/null 2>&1 &"),
                     collect, 30, 10)
    assert calls == [True]
    assert hs.artifacts == "artifacts"
    assert hs.cleanup["verified"] and hs.cleanup["termination_witnessed"]
    assert hs.cleanup["status"] == 0 and hs.cleanup_confirmed and hs.launch_started
    assert "out" in await hs.read_output_log()
    r = await sandbox.exec("ps -o args | grep -c '[s]leep 100'")
    assert r.stdout.strip() == "0"
    await hs.close(10)
    await hs.close(10)
    assert calls == [True] and hs.closed
    with pytest.raises(SandboxUsageError):
        await hs.execute(argv("true"), collect, 30, 10)


async def test_begin_activation_rearms_for_a_second_launch(sandbox):
    hs = SandboxSession(sandbox, "/tmp/.h2", None, "demo")
    await hs.execute(argv("/bin/sh", "-c", "echo one"), None, 30, 10)
    with pytest.raises(SandboxUsageError):
        await hs.execute(argv("/bin/sh", "-c", "echo two"), None, 30, 10)
    await hs.begin_activation("/tmp/.h2", 10)
    assert not hs.launch_started and hs.cleanup is None
    await hs.execute(argv("/bin/sh", "-c", "echo two"), None, 30, 10)
    assert hs.cleanup["activation"] == 2
    assert "two" in await hs.read_output_log()
    await hs.close(10)


async def test_a_close_during_staging_prevents_the_launch(sandbox):
    hs = SandboxSession(sandbox, "/tmp/.h3", None, "demo")
    staged = asyncio.Event()
    release = asyncio.Event()

    async def stage():
        staged.set()
        await release.wait()
        return SandboxCommand(["/bin/sh", "-c", "touch /tmp/launched"])

    task = asyncio.ensure_future(hs.execute(stage, None, 30, 10))
    await staged.wait()
    closing = asyncio.ensure_future(hs.close(10))
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(SandboxUnavailableError, match="staging"):
        await task
    await closing
    assert not hs.launch_started and hs.cleanup_confirmed and hs.closed
    r = await sandbox.exec("test -e /tmp/launched")
    assert r.return_code == 1


async def test_an_owned_session_falls_back_to_stopping_the_sandbox(provider):
    from sbx import AsyncSandbox, SandboxSpec
    sb = await AsyncSandbox.create(provider, SandboxSpec(image="busybox"))
    hs = SandboxSession(sb, "/tmp/.h4", None, "demo", owns_sandbox=True)
    task = asyncio.ensure_future(hs.execute(argv("/bin/sh", "-c", "trap '' TERM; sleep 100"),
                                            None, 60, 0.01))
    await asyncio.sleep(0.5)
    # A close whose deadline is too short to witness the stop removes the owned sandbox.
    await hs.close(0.001)
    assert hs.closed and hs.sandbox_stopped and hs.cleanup_confirmed
    assert not sandbox_exists(sb.sandbox_id)
    with pytest.raises(Exception):
        await task


async def test_a_bootstrap_exit_of_127_is_in_the_error(sandbox):
    hs = SandboxSession(sandbox, "/tmp/.h5", None, "missing-harness")
    with pytest.raises(SandboxTransferError, match="127"):
        await hs.execute(argv("/no/such/harness"), None, 30, 10)
    assert hs.cleanup["status"] in HARNESS_COMMAND_NOT_STARTED
    assert HARNESS_RUNNER_FAILED == 125
    await hs.close(10)


async def test_cancelling_execute_stops_the_harness_first(sandbox):
    hs = SandboxSession(sandbox, "/tmp/.h6", None, "demo")
    task = asyncio.ensure_future(hs.execute(argv("/bin/sh", "-c", "sleep 100 & sleep 100"),
                                            None, 60, 10))
    await asyncio.sleep(0.5)
    t = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t < 10
    # By the time the cancellation returned, the run was stopped and witnessed.
    assert hs.cleanup is not None and hs.cleanup["trigger"] == "stop"
    assert hs.cleanup_confirmed
    r = await sandbox.exec("ps -o args | grep -c '[s]leep 100'")
    assert r.stdout.strip() == "0"
    await hs.close(10)


async def test_expire_grades_as_a_timeout_and_before_launch_keeps_it_from_starting(sandbox):
    hs = SandboxSession(sandbox, "/tmp/.h7", None, "demo")
    task = asyncio.ensure_future(hs.execute(argv("/bin/sh", "-c", "sleep 100"), None, 60, 10))
    await asyncio.sleep(0.5)
    assert await hs.expire(5, "test") is True
    assert await hs.expire(5, "again") is False
    await task
    assert hs.expired and hs.cleanup["timed_out"] and not hs.expired_before_launch
    await hs.close(10)
    assert await hs.expire(5) is False  # closing

    early = SandboxSession(sandbox, "/tmp/.h8", None, "demo")
    assert await early.expire(5, "before") in (True, False)
    await early.execute(argv("/bin/sh", "-c", "touch /tmp/h8-ran"), None, 30, 10)
    assert early.expired_before_launch
    r = await sandbox.exec("test -e /tmp/h8-ran")
    assert r.return_code == 1
    await early.close(10)


def test_expiry_unsupported_is_never_needed():
    assert issubclass(ExpiryUnsupportedError, Exception)


async def test_shell_assignments_round_trip_through_bash(debian):
    src = shell_assignments({"A": "it's $x", "ARR": ["a b", "c'd", ""],
                             "ENV": {"K": "v w", "Q": "'"}})
    r = await debian.exec(["/bin/bash", "-c", src + '\nprintf "%s|" "$A" "${ARR[@]}" '
                           '"${#ARR[@]}" "${ENV[@]}"'])
    assert r.stdout == "it's $x|a b|c'd||3|K=v w|Q='|", r
    with pytest.raises(ValueError):
        shell_assignments({"1bad": "x"})
    with pytest.raises(ValueError):
        shell_assignments({"A": "nul\0"})
