"""Many operations on one sandbox and many sandboxes on one loop, no thread per sandbox."""
import asyncio
import os
import threading

import pytest

from conftest import needs_ns
from sbx import AsyncSandbox, SandboxSpec
from sbx import transfer

pytestmark = needs_ns


def big_tree(root, mib):
    root.mkdir()
    block = os.urandom(1 << 20)
    with open(root / "big.bin", "wb") as f:
        for _ in range(mib):
            f.write(block)


async def test_a_probe_is_answered_while_an_upload_runs(sandbox, tmp_path):
    big_tree(tmp_path / "big", 256)
    up = asyncio.ensure_future(transfer.upload_dir(sandbox, tmp_path / "big", "/big"))
    await asyncio.sleep(0.05)
    kinds = []
    while not up.done() and len(kinds) < 20:
        kinds.append(await transfer.remote_kind(sandbox, "/etc"))
    assert kinds and all(k == "dir" for k in kinds)
    assert not up.done() or len(kinds) > 1  # probes were answered during the upload
    await up
    r = await sandbox.exec("stat -c %s /big/big.bin")
    assert r.stdout == "%d\n" % (256 << 20)


async def test_mixed_operations_in_flight_on_one_sandbox(sandbox, tmp_path):
    src = tmp_path / "s"
    src.mkdir()
    (src / "f").write_text("payload")
    await transfer.upload_dir(sandbox, src, "/pre")
    ops = []
    for i in range(16):
        ops.append(transfer.remote_kind(sandbox, "/pre/f"))
        ops.append(sandbox.exec("echo %d; sleep 0.%d" % (i, i % 3)))
    ops.append(transfer.upload_dir(sandbox, src, "/up"))
    ops.append(transfer.download_dir(sandbox, "/pre", tmp_path / "down"))
    threads = threading.active_count()
    res = await asyncio.gather(*ops)
    assert threading.active_count() <= threads + 1
    for i in range(16):
        assert res[2 * i] == "file"
        assert res[2 * i + 1].stdout == "%d\n" % i
    assert (tmp_path / "down" / "f").read_text() == "payload"
    assert (await sandbox.exec("cat /up/f")).stdout == "payload"


async def test_cancelling_an_upload_leaves_the_old_tree(sandbox, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "v").write_text("1")
    await transfer.upload_path(sandbox, old, "/tree")
    big_tree(tmp_path / "new", 256)
    task = asyncio.ensure_future(transfer.upload_path(sandbox, tmp_path / "new", "/tree"))
    await asyncio.sleep(0.2)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    r = await sandbox.exec("ls /tree; cat /tree/v")
    assert r.stdout == "v\n1"
    # The connection goes on serving.
    assert await transfer.remote_kind(sandbox, "/tree/v") == "file"


async def test_cancelling_an_exec_kills_its_group(sandbox):
    task = asyncio.ensure_future(sandbox.exec("sleep 77 & sleep 77; echo never"))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):
        r = await sandbox.exec("ps -o args | grep -c '[s]leep 77'")
        if r.stdout.strip() == "0":
            break
        await asyncio.sleep(0.05)
    assert r.stdout.strip() == "0"


async def test_64_sandboxes_from_one_loop(provider, tmp_path):
    src = tmp_path / "task"
    src.mkdir()
    (src / "in.txt").write_text("x" * 1000)
    threads = threading.active_count()

    async def one(i):
        sb = await AsyncSandbox.create(provider, SandboxSpec(image="busybox"))
        try:
            await transfer.upload_dir(sb, src, "/task")
            r = await sb.exec("wc -c </task/in.txt >/task/out.txt; cat /task/out.txt")
            assert r.stdout.strip() == "1000"
            out = tmp_path / ("out%d" % i)
            assert await transfer.download_path(sb, "/task/out.txt", out) == "file"
            assert out.read_text().strip() == "1000"
            return sb.sandbox_id
        finally:
            await sb.close()

    ids = await asyncio.gather(*(one(i) for i in range(64)))
    assert len(set(ids)) == 64
    # Creation and opening use the executor's few threads; no thread per sandbox.
    assert threading.active_count() <= threads + 16
