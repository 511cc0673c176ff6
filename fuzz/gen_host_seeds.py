#!/usr/bin/env python3
"""Writes the seeds of fuzz_host (fuzz/corpus/host/): agent byte streams answering the calls
fuzz/fuzz_host.c makes, in its order (stream ids 1..12), well-formed and in hostile variants;
and the same streams for fuzz_engine (fuzz/corpus/engine/), which opens its streams in that
order, each twice: fed whole at one time, and cut in 4-byte pieces with the clock moving.
Run from the top of the tree; the files are checked in."""
import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "fake"))
import agent as A  # noqa: E402


def frame(ftype, stream, payload=b"", flags=0):
    if isinstance(payload, A.Msg):
        payload = payload.bytes()
    return A.header(ftype, flags, stream, len(payload)) + payload


def hello(fwd=False, **over):
    h = dict(arch=b"x86_64", kernel=b"6.1.0", version=b"0.1.0")
    h.update(over)
    m = (A.Msg().i64("PROTO_MIN", 1).i64("PROTO_MAX", 1).str("AGENT_VERSION", h["version"])
         .str("ARCH", h["arch"]).i64("UID", 0).i64("EUID", 0).i64("GID", 0).i64("EGID", 0)
         .i64("PID", 7).str("KERNEL", h["kernel"]).i64("CAPS", 0x7f).i64("CGROUP", 1)
         .raw("SELF_SHA256", b"\0" * 32).raw("CANARY", A.CANARY).i64("MAX_PAYLOAD", 1 << 20)
         .i64("WINDOW", 4 << 20))
    if fwd:
        m.i64(FWD, 1)
    return frame(A.HELLO, 0, m)


# TCP forwarding (docs/forwarding.md): frame types and tags.
OPEN, RESET = 0x1F, 0x1E
FWD_PORT, LISTENER, FWD, ERRNO, MESSAGE = 190, 194, 195, 2, 3
CONN = 0x80000001


def fwd_open(cid, listener=12, port=18080):
    return frame(OPEN, cid, A.Msg().i64(LISTENER, listener).i64(FWD_PORT, port))


def forward(conv):
    """The whole conversation with FWD in HELLO: stream 12 is the forward's FWD_LISTEN,
    answered ok then followed by conv; the ping moves to 14."""
    body = session({12: frame(A.RESPONSE, 12, A.ok()) + conv, 14: frame(A.PONG, 14, b"\0" * 8)})
    return hello(fwd=True) + body[len(hello()):]


def entry(path, **f):
    m = A.Msg().raw("PATH", path).str("TYPE", f.get("type", "file")).i64("MODE", 0o644)
    m.i64("UID_OF", 0).i64("GID_OF", 0).i64("SIZE", 1).i64("MTIME_NS", 0)
    if "target" in f:
        m.raw("TARGET", f["target"])
    return m.bytes()


def exec_answer(stream, out=b"hi\n"):
    b = frame(A.DATA, stream, b"\x01" + out) + frame(A.DATA, stream, b"\x01", A.END)
    b += frame(A.DATA, stream, b"\x02", A.END)
    return b + frame(A.RESPONSE, stream, A.ok().i64("OUTCOME", 0).i64("CODE", 0).i64("PID", 9))


RECEIPT = b'{"version":2,"trigger":"exit","status":0,"launched":true,"termination_witnessed":true}\n'


def download(stream, tar):
    b = b""
    for i in range(0, len(tar), 65536):
        b += frame(A.DATA, stream, b"\x01" + tar[i:i + 65536])
    b += frame(A.DATA, stream, b"\x01", A.END)
    return b + frame(A.RESPONSE, stream, A.ok().str("KIND", "file")
                     .raw("SHA256", hashlib.sha256(tar).digest()).i64("FILES", 1))


def small(tar):
    """tarfile pads to 10 KiB; two zero blocks after the last member end an archive too."""
    return tar.rstrip(b"\0") + b"\0" * (1024 + (-len(tar.rstrip(b"\0"))) % 512)


def session(over=None):
    """The whole conversation; over replaces answers by stream id."""
    tar = small(A.tar_of([A.member("a", data=b"x")]))
    ans = {
        1: frame(A.RESPONSE, 1, A.ok().str("KIND", "dir")),
        2: frame(A.RESPONSE, 2, A.ok().raw("ENTRY", entry(b"/a")).raw("ENTRY", entry(b"/b", type="symlink", target=b"/x"))),
        3: frame(A.RESPONSE, 3, A.ok().str("PHYSICAL", "/real/a")),
        4: frame(A.RESPONSE, 4, A.ok().i64("CLEAR", 0).str("PHYSICAL", "/tests/x").str("MESSAGE", "lands in /tests")),
        5: exec_answer(5),
        6: frame(A.RESPONSE, 6, A.ok().str("STATE", "running").i64("ALIVE", 1).i64("HAS_RECEIPT", 0).i64("ACTIVATION", 1).i64("SIZE", 4)),
        7: frame(A.RESPONSE, 7, A.ok().i64("SIZE", 4).raw("BYTES", b"log\n")),
        8: frame(A.RESPONSE, 8, A.ok().i64("SIZE", len(RECEIPT)).raw("BYTES", RECEIPT)),
        9: frame(A.RESPONSE, 9, A.ok().i64("SIZE", 64).raw("BYTES", b"0" * 64)),
        10: frame(A.RESPONSE, 10, A.ok().str("KIND", "file")),
        11: download(11, tar),
        12: frame(A.PONG, 12, b"\0" * 8),
    }
    ans.update(over or {})
    return hello() + b"".join(ans[k] for k in sorted(ans))


def main():
    out = os.path.join(os.path.dirname(__file__), "corpus", "host")
    os.makedirs(out, exist_ok=True)
    seeds = {
        "whole": session(),
        "hello_only": hello(),
        "hello_escapes": hello(arch=b"\x1b[2J\x9b", kernel=b"\xff\xfe\x00", version=b"\xc2\x9b1"),
        "stat_wrong_path": session({2: frame(A.RESPONSE, 2, A.ok().raw("ENTRY", entry(b"/zz")).raw("ENTRY", entry(b"/b")))}),
        "read_oversize": session({7: frame(A.RESPONSE, 7, A.ok().i64("SIZE", 1000).raw("BYTES", b"y" * 500))}),
        "unasked": session({3: frame(A.RESPONSE, 99, A.ok()) + frame(A.RESPONSE, 3, A.ok().str("PHYSICAL", "/a"))}),
        "credit_flood": session({5: frame(A.CREDIT, 5, b"\x00\xff\xff\xff\xff") + exec_answer(5)}),
        "download_symlink": session({11: download(11, small(A.tar_of([A.member("a", "symlink", target="/etc/passwd")])))}),
        "download_dir_member": session({11: download(11, small(A.tar_of([A.member("a", "dir"), A.member("a/x", data=b"1")])))}),
        "forward": forward(fwd_open(CONN) + frame(A.DATA, CONN, b"\x01GET / HTTP/1.0\r\n\r\n")
                           + frame(A.DATA, CONN, b"\x01", A.END) + frame(RESET, CONN, b"")
                           + frame(A.CREDIT, 13, b"\x01\x00\x00\x10\x00")
                           + frame(A.DATA, 13, b"\x01HTTP/1.0 200 OK\r\n")
                           + frame(RESET, 13, A.Msg().i64(ERRNO, 111).str(MESSAGE, "connect 127.0.0.1:80: refused"))),
        "forward_unasked": forward(fwd_open(CONN, listener=99)),
        "forward_other_port": forward(fwd_open(CONN, port=22)),
        "forward_host_id": forward(fwd_open(5)),
        "forward_overrun": forward(fwd_open(CONN) + b"".join(frame(A.DATA, CONN, b"\x01" + b"x" * 65536) for _ in range(5))),
        "forward_flood": forward(b"".join(fwd_open(CONN + i) for i in range(40))
                                 + b"".join(frame(A.DATA, CONN + i, b"\x01hi") for i in range(40))),
        "forward_reset_escapes": forward(fwd_open(CONN) + frame(RESET, CONN, A.Msg().i64(ERRNO, 104).raw(MESSAGE, b"\x1b[2J\x9b\xff" * 100))),
        "error_status": session({1: frame(A.RESPONSE, 1, A.err(2, "\x1b]52;c;AAAA\x07denied", 13))}),
    }
    engine = os.path.join(os.path.dirname(__file__), "corpus", "engine")
    os.makedirs(engine, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        # fuzz_engine's two leading bytes: how the input is cut, how the clock moves.
        with open(os.path.join(engine, name), "wb") as f:
            f.write(b"\x00\x00" + data)
        with open(os.path.join(engine, name + "-cut"), "wb") as f:
            f.write(b"\x07\x03" + data)


if __name__ == "__main__":
    main()
