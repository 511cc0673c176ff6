"""python3 py_provider.py RUNNER TARGET LOCAL_TREE: sbx.providers' SbxProvider on a runner that
reaches an existing sandbox (kubectl, ssh): create by provider_options["target"], exec, a
remote_kind, an upload_dir / download_dir round trip of LOCAL_TREE, status, close (which
leaves the sandbox), and a connect from the serialized handle. Prints "ok" lines; exits 1 on
the first failure. Run by tests/remote_runners.sh."""
import asyncio
import filecmp
import os
import pathlib
import sys
import tempfile

from sbx import AsyncSandbox, SandboxSpec, SandboxStatus, SbxProvider, transfer


def same_tree(a, b):
    c = filecmp.dircmp(a, b)
    if c.left_only or c.right_only or c.diff_files or c.funny_files:
        return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in c.common_dirs)


async def main(runner, target, tree):
    p = SbxProvider(runner)
    sb = await AsyncSandbox.create(p, SandboxSpec(provider_options={"target": target},
                                                  env={"K": "v w"}))
    r = await sb.exec('echo $((6*7)) "$K"; echo err >&2; exit 3')
    assert (r.stdout, r.stderr, r.return_code) == ("42 v w\n", "err\n", 3), r
    assert await transfer.remote_kind(sb, "/") == "dir"
    assert await transfer.remote_kind(sb, "/no/such/path") is None
    with tempfile.TemporaryDirectory() as tmp:
        await transfer.upload_dir(sb, pathlib.Path(tree), "/tmp/py-task")
        await transfer.download_dir(sb, "/tmp/py-task", pathlib.Path(tmp) / "back", links="keep")
        assert same_tree(tree, os.path.join(tmp, "back")), "the round trip differs"
    assert await sb.status() in (SandboxStatus.RUNNING, SandboxStatus.UNKNOWN)
    desc = await p.serialize_handle(sb.handle)
    await sb.close()
    again = await p.connect(desc)
    r = await p.exec(again, "echo again")
    assert r.stdout == "again\n", r
    await p.close(again)
    print("ok")


asyncio.run(main(*sys.argv[1:4]))
