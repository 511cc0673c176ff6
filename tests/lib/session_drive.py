#!/usr/bin/env python3
"""session_drive.py SCRIPT OUT ANSWERS: drives an `sbx session` whose stdin is this program's
stdout and whose stdout is the fifo ANSWERS, as a client that waits when it wants order
(answers come as operations end). SCRIPT: one request (a JSON line) per line, or `wait` (until
every request sent so far with an "id" has its answer: a line with that id and "ok"), or
`sleep S`. Every line the session printed goes to OUT, in its order; exit 1 when a wait saw the
session end first."""
import json
import os
import sys
import threading
import time

script, out_path, answers = sys.argv[1:4]
lines, answered = [], set()
cond = threading.Condition()
done = False


def key(v):
    return json.dumps(v)


def reader():
    global done
    with open(answers, "rb") as f:
        for raw in f:
            with cond:
                lines.append(raw)
                try:
                    a = json.loads(raw)
                    if isinstance(a, dict) and "id" in a and "ok" in a:
                        answered.add(key(a["id"]))
                except ValueError:
                    pass
                cond.notify_all()
    with cond:
        done = True
        cond.notify_all()


t = threading.Thread(target=reader)
t.start()
sent, status = set(), 0
for cmd in open(script):
    cmd = cmd.strip()
    if not cmd:
        continue
    if cmd == "wait":
        with cond:
            while not sent <= answered and not done:
                cond.wait()
            if not sent <= answered:
                status = 1
        continue
    if cmd.startswith("sleep "):
        time.sleep(float(cmd.split()[1]))
        continue
    try:
        r = json.loads(cmd)
        if isinstance(r, dict) and "id" in r and r.get("op") != "cancel":
            sent.add(key(r["id"]))
    except ValueError:
        pass
    sys.stdout.write(cmd + "\n")
    sys.stdout.flush()
sys.stdout.flush()
os.close(1)  # EOF to the session (sys.stdout.close() keeps fd 1)
t.join()
with open(out_path, "wb") as f:
    f.writelines(lines)
sys.exit(status)
