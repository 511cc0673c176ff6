"""SbxProvider.create_pty / attach_pty (docs/pty.md) on a BusyBox sandbox: a shell driven
through its terminal with async iteration; a second connection's attach replays from 0 and
from an offset, and its takeover makes the first holder's read raise SandboxPtyError; pipe
mode keeps stdout and stderr apart with the exit code; resize seen by stty.
Shown able to fail: with _core's step not waking the readers, every read timed out; with
attach's takeover passed as 0, the takeover attach failed; with pty.py's own failure
sentinel (not _core's), the attach without takeover was not refused."""
import asyncio

import pytest

from sbx import SandboxPtyError, SandboxPtySpec


async def read_until(s, want, timeout=10):
    got = b""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while want not in got:
        chunk = await s.read(timeout_s=max(0.1, end - loop.time()))
        if chunk == b"":
            break
        got += chunk
    assert want in got, got
    return got


async def test_shell_replay_takeover(provider, sandbox):
    h = sandbox.handle
    s = await provider.create_pty(h, SandboxPtySpec(rows=33, cols=91))
    assert s.mode == "pty"
    async with s:
        await s.write(b"echo hi-$((6*7)); stty size\n")
        out = await read_until(s, b"33 91")
        assert b"hi-42" in out
        await s.resize(40, 100)
        await s.write(b"stty size\n")
        await read_until(s, b"40 100")
        # Another connection (another provider) attaches: the replay from 0 has it all.
        other = type(provider)(runner=provider.runner)
        h2 = await other.connect(await provider.serialize_handle(h))
        with pytest.raises(SandboxPtyError) as refused:  # held: no takeover, no attach
            await other.attach_pty(h2, s.session_id, takeover=False)
        assert refused.value.errno == 16  # EBUSY
        t = await other.attach_pty(h2, s.session_id, takeover=True, since=0)
        replay = await read_until(t, b"40 100")
        assert b"hi-42" in replay
        with pytest.raises(SandboxPtyError):
            while await s.read(timeout_s=10):
                pass
        n = replay.index(b"hi-42")
        u = await other.attach_pty(h2, s.session_id, takeover=True, since=n)
        assert (await u.read(timeout_s=10)).startswith(b"hi-42")
        await u.write(b"exit 4\n")
        assert await u.wait_exit(timeout_s=10) == 4
        await u.close()
        await t.close()
        await other.close(h2)


async def test_pipe_mode(provider, sandbox):
    s = await provider.create_pty(sandbox.handle, SandboxPtySpec(
        command="printf 'o\\000\\377'; printf 'e\\001' >&2; exit 3", pty=False))
    async with s:
        assert s.mode == "pipe"
        assert await s.wait_exit(timeout_s=10) == 3
        assert await s.read() == b"o\0\377"
        assert await s.read_stderr() == b"e\1"
        assert await s.read() == b""
        chunks = [c async for c in s]
        assert chunks == []
