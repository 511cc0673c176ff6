"""make bench-python: the Python package measured side by side with the C library and with
the reference's way (one `docker exec` per step), in one run. Prints one line per figure and
each target with met / not met.

  python3 tests/bench/bench_python.py SBX_HOST_DIR BENCH_DIR [docker-available]
"""
import asyncio
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TOP = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "python"))

from sbx import AsyncSandbox, SandboxSpec, SbxProvider, transfer  # noqa: E402
from sbx import rollout  # noqa: E402

HOST, BENCH = sys.argv[1], sys.argv[2]
DOCKER = len(sys.argv) > 3 and sys.argv[3] == "docker"
N_PROBES = 2000


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def verdict(ok):
    return "met" if ok else "NOT met"


async def probe_round(sb, n):
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        k = await transfer.remote_kind(sb, "/tmp")
        t.append(time.perf_counter() - t0)
        assert k == "dir"
    return t


def c_probe(spec, n):
    out = subprocess.run([os.path.join(BENCH, "bench_probe"), spec, str(n)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    # "channel NAME", then "N mean_us p50_us p99_us"
    return float(out[-1].split()[2]) / 1e6, out[0].split()[-1]


def big_tree(root, mib):
    root.mkdir()
    block = os.urandom(1 << 20)
    with open(root / "big.bin", "wb") as f:
        for _ in range(mib):
            f.write(block)


async def probes_during_upload(sb, src):
    up = asyncio.ensure_future(transfer.upload_dir(sb, src, "/big"))
    await asyncio.sleep(0.05)
    lat = []
    while not up.done():
        t0 = time.perf_counter()
        await transfer.remote_kind(sb, "/etc")
        lat.append(time.perf_counter() - t0)
        await asyncio.sleep(0.001)
    await up
    return lat


def reference_probe(container, n):
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["docker", "exec", container, "sh", "-c", "test -d /tmp"], check=True)
        t.append(time.perf_counter() - t0)
    return t


def reference_upload(container, src, target):
    t0 = time.perf_counter()
    subprocess.run(["docker", "exec", container, "mkdir", "-p", target], check=True)
    tar = subprocess.Popen(["tar", "-C", str(src), "-cf", "-", "."], stdout=subprocess.PIPE)
    subprocess.run(["docker", "exec", "-i", container, "tar", "-C", target, "-xf", "-"],
                   stdin=tar.stdout, check=True)
    tar.wait()
    return time.perf_counter() - t0


async def main():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sbx-bench-py-"))
    ns = SbxProvider("ns")
    sb = await AsyncSandbox.create(ns, SandboxSpec(image="busybox"))
    try:
        await probe_round(sb, 200)
        py = statistics.median(await probe_round(sb, N_PROBES))
        c, chan = c_probe(sb.sandbox_id, N_PROBES)
        print("kind probe on ns (%s channel), %d each: Python p50 %.1f us, C p50 %.1f us, "
              "ratio x%.2f (target <= 2: %s)" % (chan, N_PROBES, py * 1e6, c * 1e6, py / c,
                                                 verdict(py <= 2 * c)))
        big_tree(tmp / "big", 1024)
        lat = await probes_during_upload(sb, tmp / "big")
        print("remote_kind during a 1 GiB upload_dir on the same sandbox: %d probes, p50 %.2f ms,"
              " p99 %.2f ms, max %.2f ms (target: within 20 ms: %s)" % (
                  len(lat), pct(lat, 0.5) * 1e3, pct(lat, 0.99) * 1e3, max(lat) * 1e3,
                  verdict(max(lat) <= 0.020)))
    finally:
        await sb.close()

    tasks = rollout.find_tasks(TOP / "examples")
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    s = await rollout.run(tasks, -(-256 // len(tasks)), 64, "ns", tmp / "rollout",
                          progress=False, limit=256)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    print("%d episodes of the %d example tasks at concurrency 64 on ns, one process: %d failures "
          "(target 0: %s), %.2f episodes/s, host CPU %.1f ms per episode (this process; the "
          "sandboxes' own work not counted)" % (s["episodes"], len(tasks), s["failed"],
                                                verdict(s["failed"] == 0), s["episodes_per_s"],
                                                cpu / s["episodes"] * 1e3))
    if s["failed"]:
        for e in s["errors"][:5]:
            print("   ", e)

    if not DOCKER:
        print("the reference's way (docker exec per step): skipped, no Docker engine")
        return
    dk = SbxProvider("docker")
    sb = await AsyncSandbox.create(dk, SandboxSpec(image="busybox"))
    try:
        name = sb.sandbox_id.split(":", 1)[1]
        ref = statistics.median(reference_probe(name, 50))
        await probe_round(sb, 100)
        mine = statistics.median(await probe_round(sb, 500))
        print("kind probe on docker: the reference's way (docker exec sh -c 'test -d') p50 %.2f ms,"
              " sbx.transfer.remote_kind p50 %.3f ms: x%.0f faster" % (ref * 1e3, mine * 1e3,
                                                                      ref / mine))
        src = tmp / "small"
        src.mkdir()
        for i in range(2000):
            (src / ("f%04d" % i)).write_bytes(os.urandom(2048))
        ref_t = min(reference_upload(name, src, "/ref%d" % i) for i in range(3))
        mine_t = []
        for i in range(3):
            t0 = time.perf_counter()
            await transfer.upload_dir(sb, src, "/mine%d" % i)
            mine_t.append(time.perf_counter() - t0)
        print("upload_dir of 2,000 files (4 MiB) into docker: tar | docker exec -i tar x %.3f s,"
              " sbx.transfer.upload_dir %.3f s: x%.2f" % (ref_t, min(mine_t),
                                                        ref_t / min(mine_t)))
        ref_t = reference_upload(name, tmp / "big", "/refbig")
        t0 = time.perf_counter()
        await transfer.upload_dir(sb, tmp / "big", "/minebig")
        mine_big = time.perf_counter() - t0
        print("upload_dir of 1 GiB into docker: tar | docker exec -i tar x %.2f s, "
              "sbx.transfer.upload_dir %.2f s: x%.2f" % (ref_t, mine_big, ref_t / mine_big))
    finally:
        await sb.close()
    subprocess.run(["rm", "-rf", str(tmp)])


asyncio.run(main())
