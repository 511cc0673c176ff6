"""python3 -m sbx rollout over the example tasks, on ns."""
import json
import os
import pathlib
import subprocess
import sys

from conftest import TOP, needs_ns

pytestmark = needs_ns


def test_the_main_job_runs_every_example_task(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TOP / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "sbx", "rollout", "--tasks", str(TOP / "examples"),
                        "--episodes", "2", "--concurrency", "4", "--out", str(tmp_path),
                        "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads(p.stdout)
    assert s["episodes"] == 10 and s["failed"] == 0, s["errors"]
    names = {"hello", "debian-report", "overrun", "escapees", "modes-links"}
    assert set(s["tasks"]) == names
    for name, t in s["tasks"].items():
        assert t["mean_reward"] == t["expect_reward"], (name, t)
    for name in names:
        rec = json.loads((tmp_path / name / "0" / "summary.json").read_text())
        h, v = rec["harness"], rec["verifier"]
        assert h["verified"] and v["verified"]
        assert h["termination_witnessed"]
        assert h["timed_out"] == (name == "overrun")
        assert (tmp_path / name / "0" / "artifacts.tar").exists()
    assert "harness_and_collect" in s["phases"] and s["episodes_per_s"] > 0


def test_a_table_and_progress_without_json(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TOP / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "sbx", "rollout", "--tasks",
                        str(TOP / "examples" / "hello"), "--episodes", "2", "--out",
                        str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2/2 done, failures: none" in p.stderr
    assert "hello" in p.stdout and "mean reward" in p.stdout and "p95" in p.stdout
    bad = subprocess.run([sys.executable, "-m", "sbx", "rollout", "--tasks", str(tmp_path / "no")],
                         capture_output=True, text=True, env=env)
    assert bad.returncode != 0
