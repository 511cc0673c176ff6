"""The main job in Python: `python3 -m sbx rollout --tasks DIR --episodes N --concurrency K`.

Every task under DIR (a folder with agent/run.sh and tests/verify.sh, and optionally
task.json: {"image", "verifier_image", "timeout", "verify_timeout", "user"}) runs N episodes,
K at once from one event loop, each as `sbx rollout` runs one (host/cli/rollout.c): an agent
sandbox, the task's agent/ uploaded to /task, /task/run.sh supervised under its deadline, its
/logs/artifacts downloaded with links kept and the agent's archive kept, a clean verifier
sandbox with tests/ at /tests, the artifacts replayed byte for byte (upload_archive, keep_out
/tests), /tests/verify.sh supervised, /logs/verifier downloaded, the reward read from
/logs/verifier/reward.txt; both receipts verified; both sandboxes removed, always.
"""
import argparse
import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

from . import transfer
from .errors import SandboxTransferError, SbxError
from .providers import AsyncSandbox, SandboxCreateError, SandboxSpec, SbxProvider
from .session import SandboxCommand, SandboxSession

PHASES = ("agent_sandbox", "upload_task", "harness_and_collect", "agent_sandbox_rm",
          "verifier_sandbox", "replay_artifacts", "verify", "verifier_sandbox_rm")


class Task:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.name = path.name
        conf = {}
        if (path / "task.json").exists():
            conf = json.loads((path / "task.json").read_text())
        self.image = conf.get("image", "busybox")
        self.verifier_image = conf.get("verifier_image", self.image)
        self.timeout = float(conf.get("timeout", 60))
        self.verify_timeout = float(conf.get("verify_timeout", 60))
        self.user = conf.get("user")
        self.expect_reward = conf.get("expect_reward")


def find_tasks(root: pathlib.Path):
    root = pathlib.Path(root)
    if not root.is_dir():
        return []
    if (root / "agent").is_dir() and (root / "tests").is_dir():
        return [Task(root)]
    return [Task(p) for p in sorted(root.iterdir())
            if (p / "agent").is_dir() and (p / "tests").is_dir()]


def failure_class(exc: BaseException) -> str:
    if isinstance(exc, SbxError):
        return exc.cls
    if isinstance(exc, SandboxCreateError):
        return "create"
    if isinstance(exc, asyncio.TimeoutError):
        return "timeout"
    return type(exc).__name__


async def _logs_skeleton(sandbox, sub):
    """/logs/SUB as 0777 folders in the sandbox, with no shell needed."""
    with tempfile.TemporaryDirectory() as tmp:
        for p in ("logs", "logs/" + sub):
            os.mkdir(os.path.join(tmp, p))
            os.chmod(os.path.join(tmp, p), 0o777)
        os.chmod(tmp, 0o755)
        await transfer.upload_dir(sandbox, pathlib.Path(tmp), "/")


async def episode(provider: SbxProvider, task: Task, out: pathlib.Path) -> dict:
    """One episode; its record (reward, receipts, phases); raises on failure with the phases
    done so far in the exception's `episode` attribute."""
    rec = {"task": task.name, "out": str(out), "phases": {}, "reward": None}
    t0 = [time.monotonic()]

    def phase(name):
        now = time.monotonic()
        rec["phases"][name] = now - t0[0]
        t0[0] = now

    out.mkdir(parents=True, exist_ok=True)
    sandboxes = []
    try:
        agent = await AsyncSandbox.create(provider, SandboxSpec(image=task.image))
        sandboxes.append(agent)
        phase("agent_sandbox")
        await transfer.upload_dir(agent, task.path / "agent", "/task")
        await _logs_skeleton(agent, "artifacts")
        phase("upload_task")
        kind = [None]

        async def collect():
            kind[0] = await transfer.download_path(agent, "/logs/artifacts", out / "artifacts",
                                                   links="keep",
                                                   archive_copy=out / "artifacts.tar")
            return kind[0]

        rec["harness"] = await _supervised(agent, "/tmp/.sbx-harness",
                                           task.path / "agent" / "run.sh", "/task",
                                           task.timeout, collect)
        phase("harness_and_collect")
        await agent.close()
        sandboxes.remove(agent)
        phase("agent_sandbox_rm")
        verifier = await AsyncSandbox.create(provider, SandboxSpec(image=task.verifier_image))
        sandboxes.append(verifier)
        phase("verifier_sandbox")
        await transfer.upload_dir(verifier, task.path / "tests", "/tests")
        await _logs_skeleton(verifier, "verifier")
        if kind[0] is not None:
            landed = await transfer.upload_archive(verifier, out / "artifacts.tar", kind[0],
                                                   "/logs/artifacts", keep_out=("/tests",))
            if not landed:
                raise SandboxTransferError("the artifacts were not replayed: diverted "
                                           "into /tests")
        phase("replay_artifacts")

        async def collect_verdict():
            return await transfer.download_path(verifier, "/logs/verifier", out / "verifier")

        rec["verifier"] = await _supervised(verifier, "/tmp/.sbx-verifier",
                                            task.path / "tests" / "verify.sh", "/tests",
                                            task.verify_timeout, collect_verdict)
        phase("verify")
        reward_file = out / "verifier" / "reward.txt"
        rec["reward"] = float(reward_file.read_text().strip()) if reward_file.exists() else 0.0
        await verifier.close()
        sandboxes.remove(verifier)
        phase("verifier_sandbox_rm")
        (out / "summary.json").write_text(json.dumps(rec) + "\n")
        return rec
    except BaseException as exc:
        exc.episode = rec
        raise
    finally:
        for sb in sandboxes:
            try:
                await asyncio.shield(sb.close())
            except Exception:
                pass


async def _supervised(sandbox, run_dir, script, inside, timeout, collect):
    """script (a local file uploaded into the sandbox's folder inside) run there under the
    supervisor, collect called once termination is witnessed; its receipt's fields. An
    executable script runs by its own #! line, any other through /bin/sh."""
    name = "%s/%s" % (inside, script.name)
    argv = [name] if os.access(script, os.X_OK) else ["/bin/sh", name]

    async def stage():
        return SandboxCommand(argv)

    hs = SandboxSession(sandbox, run_dir, inside, script.name)
    try:
        await hs.execute(stage, collect, timeout, 10)
    finally:
        await hs.close(10)
    if hs.capture_error is not None:
        raise hs.capture_error
    return _receipt(hs.cleanup)


def _receipt(r):
    if r is None:
        return None
    return {k: r[k] for k in ("verified", "trigger", "status", "timed_out",
                              "termination_witnessed", "kill_rounds", "oom_kills")}


class Progress:
    """A live line on a terminal; plain lines otherwise."""

    def __init__(self, total, stream=sys.stderr):
        self.total, self.done, self.failed = total, 0, {}
        self.stream = stream
        self.tty = stream.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0

    def update(self, failure=None):
        self.done += 1
        if failure:
            self.failed[failure] = self.failed.get(failure, 0) + 1
        now = time.monotonic()
        rate = self.done / max(now - self.t0, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else 0
        fails = ", ".join("%s %d" % kv for kv in sorted(self.failed.items())) or "none"
        line = "%d/%d done, failures: %s, %.2f episodes/s, ETA %.0f s" % (
            self.done, self.total, fails, rate, eta)
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if self.done == self.total else ""))
            self.stream.flush()
        elif now - self.last >= 1.0 or self.done == self.total:
            self.stream.write(line + "\n")
            self.last = now


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


async def run(tasks, episodes, concurrency, runner, out_root, progress=True, limit=None):
    """Runs `episodes` of each task (at most `limit` in all, taken round robin), `concurrency`
    at once; the summary (summarize)."""
    provider = SbxProvider(runner=runner)
    sem = asyncio.Semaphore(concurrency)
    jobs = [(t, i) for i in range(episodes) for t in tasks][:limit]
    prog = Progress(len(jobs)) if progress else None
    results, failures = [], []
    t_start = time.monotonic()
    cpu_start = os.times()

    async def one(task, i):
        async with sem:
            try:
                rec = await episode(provider, task, pathlib.Path(out_root) / task.name / str(i))
                results.append(rec)
                cls = None
            except Exception as exc:
                cls = failure_class(exc)
                rec = dict(getattr(exc, "episode", {"task": task.name}))
                rec["error"] = {"class": cls, "message": str(exc)}
                failures.append(rec)
            if prog:
                prog.update(cls)

    await asyncio.gather(*(one(t, i) for t, i in jobs))
    await provider.aclose()
    wall = time.monotonic() - t_start
    cpu_end = os.times()
    cpu = (cpu_end.user - cpu_start.user) + (cpu_end.system - cpu_start.system)
    return summarize(tasks, results, failures, wall, cpu)


def summarize(tasks, results, failures, wall, cpu):
    n = len(results) + len(failures)
    per_task = {}
    for t in tasks:
        rs = [r["reward"] for r in results if r["task"] == t.name and r["reward"] is not None]
        per_task[t.name] = {"episodes": sum(1 for r in results + failures
                                            if r.get("task") == t.name),
                            "failures": sum(1 for r in failures if r.get("task") == t.name),
                            "mean_reward": statistics.fmean(rs) if rs else None,
                            "expect_reward": t.expect_reward}
    phases = {}
    for p in PHASES:
        vals = [r["phases"][p] for r in results if p in r.get("phases", {})]
        if vals:
            phases[p] = {"p50": pct(vals, 0.5), "p95": pct(vals, 0.95)}
    by_class = {}
    for f in failures:
        c = f["error"]["class"]
        by_class[c] = by_class.get(c, 0) + 1
    return {"episodes": n, "ok": len(results), "failed": len(failures),
            "failures_by_class": by_class, "tasks": per_task, "phases": phases,
            "seconds": wall, "episodes_per_s": n / wall if wall > 0 else None,
            "host_cpu_s_per_episode": cpu / n if n else None,
            "errors": [f["error"] | {"task": f.get("task")} for f in failures[:20]]}


def print_table(s, stream=sys.stdout):
    w = stream.write
    w("%d episodes, %d ok, %d failed in %.1f s (%.2f episodes/s, host CPU %.3f s each)\n" % (
        s["episodes"], s["ok"], s["failed"], s["seconds"], s["episodes_per_s"] or 0,
        s["host_cpu_s_per_episode"] or 0))
    w("\n%-28s %9s %9s %12s\n" % ("task", "episodes", "failures", "mean reward"))
    for name, t in sorted(s["tasks"].items()):
        r = "-" if t["mean_reward"] is None else "%.3f" % t["mean_reward"]
        w("%-28s %9d %9d %12s\n" % (name, t["episodes"], t["failures"], r))
    w("\n%-28s %10s %10s\n" % ("phase", "p50 s", "p95 s"))
    for name, p in s["phases"].items():
        w("%-28s %10.3f %10.3f\n" % (name, p["p50"], p["p95"]))
    w("\nfailures by class: %s\n" % (", ".join("%s %d" % kv for kv in
                                              sorted(s["failures_by_class"].items()))
                                     or "none"))
    for e in s["errors"]:
        w("  %s: %s: %s\n" % (e.get("task"), e["class"], e["message"].encode(
            "ascii", "backslashreplace").decode()))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m sbx rollout",
                                 description="agent-rollout episodes of every task under DIR")
    ap.add_argument("--tasks", required=True, type=pathlib.Path)
    ap.add_argument("--episodes", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runner", default="ns", choices=("ns", "podman", "docker"))
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("rollout-out"))
    ap.add_argument("--json", action="store_true", help="the summary as one JSON object")
    a = ap.parse_args(argv)
    tasks = find_tasks(a.tasks)
    if not tasks:
        ap.error("no task (a folder with agent/ and tests/) under %s" % a.tasks)
    if a.episodes < 1 or a.concurrency < 1:
        ap.error("--episodes and --concurrency are at least 1")
    s = asyncio.run(run(tasks, a.episodes, a.concurrency, a.runner, a.out,
                        progress=not a.json or sys.stderr.isatty()))
    if a.json:
        print(json.dumps(s))
    else:
        print_table(s)
    return 0 if s["failed"] == 0 else 1
