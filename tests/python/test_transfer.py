"""sbx.transfer: the reference's acceptance behaviours on real sandboxes."""
import asyncio
import os
import pathlib
import stat

import pytest

from conftest import RUNNER, TOP, needs_ns, reachable_by, run_python
from sbx import (AsyncSandbox, SandboxProbeError, SandboxSpec, SandboxTransferError,
                 SandboxUnavailableError, SandboxUsageError)
from sbx import transfer


def make_tree(root: pathlib.Path):
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    os.chmod(root / "bin" / "tool", 0o750)
    (root / "private").mkdir()
    (root / "private" / "key").write_text("k")
    os.chmod(root / "private" / "key", 0o600)
    os.chmod(root / "private", 0o700)
    (root / "ro.txt").write_text("ro")
    os.chmod(root / "ro.txt", 0o444)
    (root / "cache.tmp").write_text("x")
    (root / "bin" / "deep.tmp").write_text("x")
    os.link(root / "ro.txt", root / "ro.hard")
    os.symlink("bin/tool", root / "tool")
    (root / "empty").mkdir()


def modes(root: pathlib.Path):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = pathlib.Path(dirpath) / n
            st = os.lstat(p)
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


@pytest.mark.parametrize("mask", [0o022, 0o077])
async def test_modes_links_and_hard_links_survive_a_round_trip(sandbox, tmp_path, mask):
    src = tmp_path / "src"
    make_tree(src)
    old = os.umask(mask)
    try:
        await transfer.upload_dir(sandbox, src, "/data")
        r = await sandbox.exec("stat -c '%a %i' /data/bin/tool /data/ro.txt /data/ro.hard; "
                               "readlink /data/tool")
        lines = r.stdout.split("\n")
        assert lines[0].split()[0] == "750"
        assert lines[1].split()[0] == "444"
        assert lines[1].split()[1] == lines[2].split()[1]  # the same inode
        assert lines[3] == "bin/tool"
        back = tmp_path / "back"
        await transfer.download_dir(sandbox, "/data", back, links="keep")
    finally:
        os.umask(old)
    assert modes(back) == modes(src)
    assert os.stat(back / "ro.txt").st_ino == os.stat(back / "ro.hard").st_ino
    assert os.readlink(back / "tool") == "bin/tool"


async def test_exclude_leaves_tmp_files_out_at_any_depth(sandbox, tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    await transfer.upload_dir(sandbox, src, "/data")
    back = tmp_path / "back"
    await transfer.download_dir(sandbox, "/data", back, exclude=("*.tmp",), links="keep")
    assert not (back / "cache.tmp").exists() and not (back / "bin" / "deep.tmp").exists()
    assert (back / "bin" / "tool").exists()


async def test_owners_kept_in_the_sandbox_and_set_id_stripped_on_the_host(sandbox, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "suid").write_text("x")
    os.chown(src / "suid", 1001, 2002)
    os.chmod(src / "suid", 0o4755)
    await transfer.upload_dir(sandbox, src, "/own")
    r = await sandbox.exec("stat -c '%u:%g %a' /own/suid")
    assert r.stdout == "1001:2002 4755\n"
    back = tmp_path / "back"
    assert await transfer.download_path(sandbox, "/own/suid", back) == "file"
    assert stat.S_IMODE(os.stat(back).st_mode) == 0o755


@pytest.mark.parametrize("link", ["/etc/passwd", "../escaped"])
async def test_links_leaving_the_root_are_refused_and_no_archive_is_kept(sandbox, tmp_path,
                                                                         link):
    await sandbox.exec("mkdir -p /out && echo ok >/out/fine && ln -s %s /out/bad" % link)
    copy = tmp_path / "out.tar"
    with pytest.raises(SandboxTransferError, match="bad"):
        await transfer.download_dir(sandbox, "/out", tmp_path / "out", archive_copy=copy)
    assert not copy.exists()
    assert not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path)) == []


async def test_download_path_kinds_and_absence(sandbox, tmp_path):
    await sandbox.exec("mkdir -p /d/sub && echo f >/d/sub/f && chmod 0751 /d/sub/f")
    assert await transfer.remote_kind(sandbox, "/d") == "dir"
    assert await transfer.remote_kind(sandbox, "/d/sub/f") == "file"
    assert await transfer.remote_kind(sandbox, "/d/none") is None
    assert await transfer.download_path(sandbox, "/d/none", tmp_path / "x") is None
    assert not (tmp_path / "x").exists()
    assert await transfer.download_path(sandbox, "/d/sub/f", tmp_path / "f") == "file"
    assert stat.S_IMODE(os.stat(tmp_path / "f").st_mode) == 0o751
    assert await transfer.download_path(sandbox, "/d", tmp_path / "d") == "dir"
    assert (tmp_path / "d" / "sub" / "f").read_text() == "f\n"


async def test_upload_archive_replays_byte_for_byte_and_keeps_out(provider, sandbox, tmp_path):
    await sandbox.exec("mkdir -p /logs/a/x && echo 1 >/logs/a/x/one && chmod 0604 /logs/a/x/one"
                       " && chmod 0777 /logs/a/x")
    copy = tmp_path / "a.tar"
    kind = await transfer.download_path(sandbox, "/logs/a", tmp_path / "a", links="keep",
                                        archive_copy=copy)
    assert kind == "dir" and copy.exists()
    other = await AsyncSandbox.create(provider, SandboxSpec(image="busybox"))
    try:
        assert await transfer.upload_archive(other, copy, kind, "/logs/a", keep_out=("/tests",))
        r = await other.exec("stat -c %a /logs/a/x /logs/a/x/one")
        assert r.stdout == "777\n604\n"
        # A link in the way that diverts the restore into a keep_out folder: nothing lands.
        await other.exec("mkdir -p /tests && echo t >/tests/t && rm -rf /logs/b && "
                         "ln -s /tests /logs/b")
        assert not await transfer.upload_archive(other, copy, kind, "/logs/b",
                                                 keep_out=("/tests",))
        r = await other.exec("ls /tests")
        assert r.stdout == "t\n"
    finally:
        await other.close()


async def test_upload_path_replaces_a_folder_and_opens_it(sandbox, tmp_path):
    src = tmp_path / "res"
    src.mkdir()
    (src / "new").write_text("n")
    await sandbox.exec("mkdir -p /res && echo old >/res/old")
    await transfer.upload_path(sandbox, src, "/res")
    r = await sandbox.exec("ls /res; stat -c %a /res")
    assert r.stdout == "new\n777\n"


async def test_a_corrupt_archive_is_a_transfer_error(sandbox, tmp_path):
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"\x00not a tar archive" * 100)
    with pytest.raises(SandboxTransferError):
        await transfer.upload_archive(sandbox, bad, "dir", "/restored")


async def test_a_lost_sandbox_is_unavailable_never_absent(provider, tmp_path):
    sb = await AsyncSandbox.create(provider, SandboxSpec(image="busybox"))
    assert await transfer.remote_kind(sb, "/") == "dir"
    await provider._teardown(sb.handle)
    sb.handle.raw.owned = False
    with pytest.raises(SandboxUnavailableError):
        await transfer.remote_kind(sb, "/etc")
    with pytest.raises(SandboxUnavailableError):
        await transfer.download_path(sb, "/etc/passwd", tmp_path / "p")
    await sb.close()


async def test_exec_as_root_and_the_fallback_to_the_default_user(sandbox):
    r = await transfer.exec_as_root(sandbox, "id -u", 30)
    assert r.stdout == "0\n"
    if not reachable_by(65534, TOP / "python" / "sbx"):
        pytest.skip("uid 65534 cannot reach %s (a folder above it is closed)" % TOP)
    # A sandbox that cannot switch to root (the agent runs as uid 65534, the local runner in
    # a process of that user): the command runs as the default user instead.
    code = """
import asyncio
from sbx import AsyncSandbox, SandboxSpec, SbxProvider, transfer
async def main():
    sb = await AsyncSandbox.create(SbxProvider("local"), SandboxSpec())
    r = await transfer.exec_as_root(sb, "id -u", 30)
    print(r.return_code, r.stdout.strip())
    await sb.close()
asyncio.run(main())
"""
    p = run_python(code, user=65534)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "65534"]


def test_tar_extract_command_says_why_there_is_none():
    with pytest.raises(NotImplementedError, match="no shell"):
        transfer.tar_extract_command("/tmp/a.tar", "/x")
    assert transfer.TRANSFER_USER == "root"


async def test_bad_arguments_are_usage_errors(sandbox, tmp_path):
    with pytest.raises(SandboxUsageError):
        await transfer.download_dir(sandbox, "/etc", tmp_path / "e", links="follow")
    with pytest.raises(SandboxUsageError):
        await transfer.upload_archive(sandbox, tmp_path / "x.tar", "fifo", "/x")
