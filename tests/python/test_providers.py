"""sbx.providers: create, exec, files, status, close, ttl, pause/resume, handles across
processes, on real ns sandboxes."""
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

from conftest import RUNNER, SBX, needs_ns, run_python, sandbox_exists
from sbx import (AsyncSandbox, SandboxCreateError, SandboxResources, SandboxSpec,
                 SandboxStatus, SandboxUsageError, SbxProvider)
from sbx import transfer


async def test_create_applies_workdir_env_and_files(provider):
    spec = SandboxSpec(image="busybox", workdir="/work/dir", env={"GREETING": "hi there"},
                       files={"/etc/motd.d/x.txt": "hello\n", "/root/y": "z"})
    sb = await AsyncSandbox.create(provider, spec)
    try:
        r = await sb.exec('pwd; echo "$GREETING"; cat /etc/motd.d/x.txt /root/y')
        assert r.return_code == 0 and r.error_type is None
        assert r.stdout == "/work/dir\nhi there\nhello\nz"
        assert r.stderr == ""
        # A call's env goes over the sandbox's, its cwd over the workdir.
        r = await sb.exec('echo "$GREETING"; pwd', env={"GREETING": "over"}, cwd="/tmp")
        assert r.stdout == "over\n/tmp\n"
        assert await sb.status() == SandboxStatus.RUNNING
    finally:
        await sb.close()
    assert await sb.status() == SandboxStatus.STOPPED
    assert not sandbox_exists(sb.sandbox_id)
    await sb.close()  # idempotent


async def test_exec_result_fields(sandbox):
    r = await sandbox.exec("printf 'a\\377b'; printf 'err' >&2; exit 7")
    assert (r.stdout, r.stderr, r.return_code, r.error_type) == ("a\ufffdb", "err", 7, None)
    t = time.monotonic()
    r = await sandbox.exec("sleep 30", timeout_s=0.5)
    assert r.return_code == 124 and r.error_type == "timeout"
    assert time.monotonic() - t < 10
    r = await sandbox.exec("id -u", user=65534)
    assert r.stdout == "65534\n"
    r = await sandbox.exec("exec /no/such/program")
    assert r.return_code == 127


@needs_ns
async def test_exec_argv_on_an_image_without_a_shell(provider):
    sb = await AsyncSandbox.create(provider, SandboxSpec(image="noshell"))
    try:
        r = await sb.exec("true")
        assert r.return_code == 127 and r.error_type is None
        assert await transfer.remote_kind(sb, "/") == "dir"
    finally:
        await sb.close()


@needs_ns
async def test_lost_sandbox_is_an_error_type_not_an_exit_code(provider, tmp_path):
    sb = await AsyncSandbox.create(provider, SandboxSpec(image="busybox"))
    await sb.exec("true")
    await provider._teardown(sb.handle)  # the sandbox goes away under the handle
    sb.handle.raw.owned = False
    r = await sb.exec("true")
    assert r.return_code == -1 and r.error_type == "unavailable", r
    await sb.close()


@needs_ns
async def test_create_refuses_what_it_cannot_hold(provider):
    with pytest.raises(SandboxCreateError, match="GPU"):
        await provider.create(SandboxSpec(image="busybox", resources={"gpu": 1}))
    with pytest.raises(SandboxCreateError, match="x.tar"):
        await provider.create(SandboxSpec(image="/no/such/x.tar"))
    with pytest.raises(SandboxCreateError):
        await provider.create(SandboxSpec(image="/no/such/image/folder"))
    with pytest.raises(SandboxCreateError, match="provider_options"):
        await provider.create(SandboxSpec(image="busybox", provider_options={"bogus": 1}))
    with pytest.raises(ValueError):
        SandboxResources.from_mapping({"cpus": 1})


@needs_ns
async def test_a_root_filesystem_tarball_on_ns(provider, tmp_path, monkeypatch):
    monkeypatch.setenv("SBX_IMAGE_CACHE", str(tmp_path / "cache"))
    tarball = pathlib.Path(__file__).resolve().parents[2] / "build/images/busybox-x86_64.tar"
    made = []
    for _ in range(2):
        sb = await AsyncSandbox.create(provider, SandboxSpec(image=str(tarball)))
        made.append(sb)
        r = await sb.exec("cat /etc/hostname >/dev/null; ls /bin/busybox; id -u")
        assert r.stdout == "/bin/busybox\n0\n", r
    entries = os.listdir(tmp_path / "cache")
    assert len(entries) == 1 and len(entries[0]) == 16  # unpacked once, by its digest
    for sb in made:
        await sb.close()


@pytest.mark.parametrize("ready", [1e-6, 0.05])
async def test_ready_timeout_removes_what_was_made(provider, ready):
    name = "pyready-%d-%d" % (os.getpid(), int(ready * 1e6))
    spec = SandboxSpec(image="busybox", ready_timeout_s=ready,
                       files={"/f%d" % i: "x" * 1000 for i in range(200)},
                       provider_options={"name": name})
    with pytest.raises(SandboxCreateError, match="ready"):
        await provider.create(spec)
    await asyncio.sleep(1)  # a create left running in its thread would have made it by now
    assert not sandbox_exists("%s:%s" % (RUNNER, name))


async def test_resources_reach_the_sandbox(provider):
    sb = await AsyncSandbox.create(provider, SandboxSpec(
        image="busybox", resources=SandboxResources(cpu=0.5, memory_mib=64),
        provider_options={"pids": 64}))
    try:
        out = await asyncio.get_running_loop().run_in_executor(None, lambda: subprocess.run(
            [SBX, "--json", "sandbox", "status", sb.sandbox_id], capture_output=True,
            text=True).stdout)
        st = json.loads(out)
        assert st["resources"]["memory_mib"] == 64 and st["resources"]["pids"] == 64
        assert abs(st["resources"]["cpu"] - 0.5) < 1e-9
    finally:
        await sb.close()


async def test_ttl_removes_the_sandbox_even_when_the_caller_dies():
    code = """
import asyncio, os, sys
from sbx import SbxProvider, SandboxSpec
async def main():
    h = await SbxProvider(sys.argv[1]).create(SandboxSpec(image="busybox", ttl_s=2))
    print(h.sandbox_id, flush=True)
    os.kill(os.getpid(), 9)
asyncio.run(main())
"""
    p = run_python(code, RUNNER)
    assert p.returncode == -signal.SIGKILL, p.stderr
    spec = p.stdout.strip()
    assert spec.startswith(RUNNER + ":") and sandbox_exists(spec)
    for _ in range(100):
        if not sandbox_exists(spec):
            break
        await asyncio.sleep(0.1)
    assert not sandbox_exists(spec)


async def test_entrypoint_runs_under_the_supervisor(provider):
    sb = await AsyncSandbox.create(provider, SandboxSpec(
        image="busybox", entrypoint=["/bin/sh", "-c", "echo up >/tmp/ep; exec sleep 100"]))
    try:
        for _ in range(100):
            if await transfer.remote_kind(sb, "/tmp/ep") == "file":
                break
            await asyncio.sleep(0.05)
        r = await sb.exec("cat /tmp/ep")
        assert r.stdout == "up\n"
    finally:
        await sb.close()


async def test_pause_and_resume(provider, sandbox):
    await provider.pause(sandbox.handle)
    assert await sandbox.status() == SandboxStatus.PAUSED
    await provider.resume(sandbox.handle)
    assert await sandbox.status() == SandboxStatus.RUNNING
    r = await sandbox.exec("echo back")
    assert r.stdout == "back\n"


async def test_upload_and_download_file(sandbox, tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(bytes(range(256)) * 100)
    os.chmod(src, 0o640)
    await sandbox.exec("mkdir -p /keep && chmod 0711 /keep")
    await sandbox.upload_file(src, "/keep/f.bin")
    r = await sandbox.exec("stat -c '%a %s' /keep /keep/f.bin")
    assert r.stdout == "711 4096\n640 25600\n"
    dst = tmp_path / "back.bin"
    await sandbox.download_file("/keep/f.bin", dst)
    assert dst.read_bytes() == src.read_bytes()
    from sbx import SandboxTransferError
    with pytest.raises(SandboxTransferError):
        await sandbox.download_file("/keep", tmp_path / "dir")
    with pytest.raises(SandboxUsageError):
        await sandbox.upload_file(src, "relative/path")


async def test_serialize_then_connect_from_a_second_process_stops_a_harness(provider,
                                                                          sandbox):
    from sbx.session import SandboxCommand, SandboxSession
    hs = SandboxSession(sandbox, "/tmp/.run1", None, "sleeper")

    async def stage():
        return SandboxCommand(["/bin/sh", "-c", "sleep 100"])

    task = asyncio.ensure_future(hs.execute(stage, None, 60, 5))
    for _ in range(200):
        try:
            st = await (await sandbox.connection()).run_status("/tmp/.run1")
            if st.state == b"running":
                break
        except SandboxUsageError:  # not made yet
            pass
        await asyncio.sleep(0.02)
    desc = await provider.serialize_handle(sandbox.handle)
    json.dumps(desc)  # a JSON descriptor
    code = """
import asyncio, json, sys
from sbx import SbxProvider
async def main():
    p = SbxProvider(sys.argv[2])
    h = await p.connect(json.loads(sys.argv[1]))
    conn = await p._conn(h)
    await conn.run_stop("/tmp/.run1")
    await p.close(h)
asyncio.run(main())
"""
    t = time.monotonic()
    p = run_python(code, json.dumps(desc), RUNNER)
    assert p.returncode == 0, p.stderr
    await asyncio.wait_for(task, 20)
    assert hs.cleanup["trigger"] == "stop" and hs.cleanup["verified"]
    assert hs.cleanup_confirmed
    assert time.monotonic() - t < 20
    # The second process's close left the sandbox to its maker.
    assert sandbox_exists(sandbox.sandbox_id)


async def test_a_handle_of_another_provider_is_refused(provider):
    from sbx import SandboxHandle
    with pytest.raises(SandboxUsageError):
        await provider.exec(SandboxHandle("x", "other", raw={}), "true")
    with pytest.raises(SandboxUsageError):
        await provider.connect({"provider": "other"})
