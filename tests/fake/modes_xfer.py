"""Transfer misbehaviours of the impersonated agent (loaded by agent.py): downloads whose
archive or answer is hostile. Archives come from a file (SBX_FAKE_TAR) or are generated and
streamed as the host's credit allows (the hostile ones are large; nothing is held whole), so
the fake agent's own memory stays small next to what the host is measured against.

Environment: SBX_FAKE_TAR (tar_file), SBX_FAKE_KIND ("dir" or "file": what KIND and DOWNLOAD
say), SBX_FAKE_N (a generator's size), SBX_FAKE_DELAY (slow: seconds between pieces).
"""
import hashlib
import os
import struct
import time

BLOCK = 512


def _kind(a):
    k = os.environ.get("SBX_FAKE_KIND")
    if k:
        a.download_kind = k
        a.kinds = _Always(k)


class _Always(dict):
    def get(self, key, default=None):
        return self.value

    def __init__(self, value):
        super().__init__()
        self.value = value


def _watch_cancel(a):
    if hasattr(a, "cancelled"):
        return
    a.cancelled = set()
    prev = a.on_frame

    def hook(agent, ftype, flags, stream, payload):
        if ftype == CANCEL:
            agent.cancelled.add(stream)
        return prev(agent, ftype, flags, stream, payload) if prev else False

    a.on_frame = hook


def _send(a, stream, data):
    """DATA on channel 1 within the credit; False once the host cancelled the stream."""
    key = (stream, 1)
    a.credit.setdefault(key, WINDOW)
    pos = 0
    while pos < len(data):
        while a.credit[key] <= 0:
            if stream in a.cancelled or not a.serve_one():
                return False
        if stream in a.cancelled:
            return False
        n = min(CHUNK, len(data) - pos, a.credit[key])
        a.send(DATA, stream, bytes([1]) + data[pos:pos + n])
        a.credit[key] -= n
        pos += n
    return stream not in a.cancelled


def _stream_download(a, make_chunks, bad_sha=False, delay=0.0):
    """Installs a DOWNLOAD handler that streams make_chunks() (an iterator of bytes)."""
    _kind(a)
    _watch_cancel(a)

    def handler(agent, stream, fields):
        kind = agent.download_kind or "dir"
        h = hashlib.sha256()
        n = 0
        for chunk in make_chunks():
            h.update(chunk)
            n += len(chunk)
            if not _send(agent, stream, chunk):
                agent.send(DATA, stream, bytes([1]), END)
                agent.respond(stream, err(1, "cancelled by the host"))
                return
            if delay:
                time.sleep(delay)
        agent.send(DATA, stream, bytes([1]), END)
        sha = b"\0" * 32 if bad_sha else h.digest()
        m = ok().str("KIND", kind).raw("SHA256", sha).i64("FILES", 1).i64("DIRS", 0)
        m.i64("LINKS", 0).i64("BYTES", 0).i64("ARCHIVE_BYTES", n)
        agent.respond(stream, m)

    a.handlers[OP["DOWNLOAD"]] = handler


# ---- raw tar blocks ----

def _octal(v, width):
    return ("%0*o" % (width - 1, v)).encode() + b"\0"


def tar_header(name, typ=b"0", size=0, mode=0o644, link=b"", gnu=False, extra=None):
    """One 512-byte header; extra(h) may edit the bytearray before the checksum."""
    if isinstance(name, str):
        name = name.encode()
    h = bytearray(BLOCK)
    h[0:len(name[:100])] = name[:100]
    h[100:108] = _octal(mode, 8)
    h[108:116] = _octal(0, 8)
    h[116:124] = _octal(0, 8)
    h[124:136] = _octal(size, 12)
    h[136:148] = _octal(1500000000, 12)
    h[156:157] = typ
    h[157:157 + len(link[:100])] = link[:100]
    h[257:265] = b"ustar  \0" if gnu else b"ustar\x0000"
    if extra is not None:
        extra(h)
    h[148:156] = b" " * 8
    h[148:156] = ("%06o" % sum(h)).encode() + b"\0 "
    return bytes(h)


def pad(data):
    return data + b"\0" * (-len(data) % BLOCK)


def pax_record(key, value):
    if isinstance(key, str):
        key = key.encode()
    if isinstance(value, str):
        value = value.encode()
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n = len(str(n)) + len(body)
    return str(n).encode() + body


def pax_header(records, typ=b"x"):
    body = b"".join(pax_record(k, v) for k, v in records)
    return tar_header("PaxHeaders/x", typ, len(body)) + pad(body)


def member_file(name, data=b"", mode=0o644):
    recs = [("path", name)] if len(name) > 100 else []
    out = pax_header(recs) if recs else b""
    return out + tar_header(name, b"0", len(data), mode) + pad(data)


def member_dir(name, mode=0o755):
    recs = [("path", name)] if len(name) > 100 else []
    out = pax_header(recs) if recs else b""
    return out + tar_header(name, b"5", 0, mode)


END_MARK = b"\0" * 1024


def _n(default):
    return int(os.environ.get("SBX_FAKE_N") or default)


# ---- modes ----

def mode_tar_file(a):
    """DOWNLOAD sends the bytes of the file SBX_FAKE_TAR."""
    with open(os.environ["SBX_FAKE_TAR"], "rb") as f:
        a.tar = f.read()
    _kind(a)


def mode_tar_stream(a):
    """As tar_file, streamed (so bad_sha and slow combine with it)."""
    path = os.environ["SBX_FAKE_TAR"]

    def chunks():
        with open(path, "rb") as f:
            while True:
                b = f.read(8192)
                if not b:
                    return
                yield b

    _stream_download(a, chunks, bad_sha=getattr(a, "bad_sha", False),
                     delay=getattr(a, "delay", 0.0))


def mode_bad_sha(a):
    """The DOWNLOAD answer's SHA-256 is not the stream's (give before a streaming mode)."""
    a.bad_sha = True
    a.sent_sha = b"\0" * 32


def mode_slow(a):
    """Pieces of a streamed download SBX_FAKE_DELAY s apart (give before a streaming mode)."""
    a.delay = float(os.environ.get("SBX_FAKE_DELAY", "0.05"))


def mode_gnu_sparse_old(a):
    """One old GNU sparse member whose map goes on for SBX_FAKE_N extension blocks of 21
    entries each (libarchive keeps every entry in memory)."""
    blocks = _n(200000)

    def sparse_entries(h, at, count, base):
        for i in range(count):
            off = at + 24 * i
            h[off:off + 12] = _octal(base + 2 * i + 2, 12)
            h[off + 12:off + 24] = _octal(1, 12)

    def head(h):
        sparse_entries(h, 386, 4, 0)
        h[482] = 1
        h[483:495] = _octal(1 << 40, 12)

    def chunks():
        yield tar_header("sparse", b"S", 4 + 21 * blocks, gnu=True, extra=head)
        ext = bytearray(BLOCK)
        sparse_entries(ext, 0, 21, 100)
        ext[504] = 1
        ext = bytes(ext)
        batch = ext * 2048
        left = blocks - 1
        while left >= 2048:
            yield batch
            left -= 2048
        yield ext * left
        last = bytearray(ext)
        last[504] = 0
        yield bytes(last)
        yield pad(b"x" * (4 + 21 * blocks))
        yield END_MARK

    _stream_download(a, chunks)


def _sparse_member(records, data=b""):
    return pax_header(records) + tar_header("GNUSparseFile.0/f", b"0", len(data)) + pad(data)


def mode_pax_sparse_00(a):
    """pax GNU.sparse 0.0: offset/numbytes record pairs filling a 500 KiB header."""
    n = _n(11000)
    recs = [("GNU.sparse.size", str(1 << 40)), ("GNU.sparse.numblocks", str(n))]
    for i in range(n):
        recs += [("GNU.sparse.offset", str(2 * i)), ("GNU.sparse.numbytes", "1")]
    _stream_download(a, lambda: iter([_sparse_member(recs, b"x" * n), END_MARK]))


def mode_pax_sparse_01(a):
    """pax GNU.sparse 0.1: a GNU.sparse.map of SBX_FAKE_N pairs."""
    n = _n(100000)
    m = ",".join(["0,1"] * n)
    recs = [("GNU.sparse.size", str(1 << 40)), ("GNU.sparse.numblocks", str(n)),
            ("GNU.sparse.map", m)]
    _stream_download(a, lambda: iter([_sparse_member(recs, b"x" * n), END_MARK]))


def mode_pax_sparse_10(a):
    """pax GNU.sparse 1.0: a map of SBX_FAKE_N entries at the start of the data."""
    n = _n(8000000)

    def chunks():
        recs = [("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0"),
                ("GNU.sparse.name", "f"), ("GNU.sparse.realsize", str(1 << 40))]
        pair = b"0\n1\n"
        size = len(b"%d\n" % n) + len(pair) * n
        yield pax_header(recs) + tar_header("GNUSparseFile.0/f", b"0", size)
        yield b"%d\n" % n
        batch = pair * 65536
        left = n
        while left >= 65536:
            yield batch
            left -= 65536
        yield pair * left
        yield b"\0" * (-size % BLOCK)
        yield END_MARK

    _stream_download(a, chunks)


def mode_pax_nested(a):
    """32 pax headers of 1 MiB each in front of one member (libarchive nests up to 32)."""
    def chunks():
        big = pax_header([("comment", "c" * (1024 * 1024 - 64))])
        for _ in range(31):
            yield big
        yield member_file("f", b"data") + END_MARK

    _stream_download(a, chunks)


def mode_long_names(a):
    """A GNU long name and long link target of 900 KiB each (type 'L', 'K')."""
    def chunks():
        name = ("n" * 200 + "/") * 4600 + "f"
        link = ("l" * 200 + "/") * 4600 + "t"
        yield tar_header("././@LongLink", b"L", len(name) + 1, gnu=True) + pad(name.encode() + b"\0")
        yield tar_header("././@LongLink", b"K", len(link) + 1, gnu=True) + pad(link.encode() + b"\0")
        yield tar_header("x", b"2", 0, 0o777, b"t", gnu=True) + END_MARK

    _stream_download(a, chunks)


def _long_prefix(length):
    comp = "p" * 200 + "/"
    return comp * (length // len(comp))


def mode_many_dirs(a):
    """SBX_FAKE_N folders whose names are 400 KiB long (one shared prefix): the deferred
    metadata of each keeps its name."""
    n = _n(200)
    prefix = _long_prefix(400 * 1024)

    def chunks():
        for i in range(n):
            yield member_dir(prefix + "d%d" % i)
        yield END_MARK

    _stream_download(a, chunks)


def mode_many_links(a):
    """SBX_FAKE_N hard links to members that never come, names and targets 200 KiB long:
    each waits for the end of the archive, with its names."""
    n = _n(200)
    prefix = _long_prefix(200 * 1024)

    def chunks():
        yield member_dir(prefix[:-1])
        for i in range(n):
            recs = [("path", prefix + "h%d" % i), ("linkpath", prefix + "missing%d" % i)]
            yield pax_header(recs) + tar_header("h", b"1", 0, 0o644, b"m")
        yield END_MARK

    _stream_download(a, chunks)


def mode_deep(a):
    """A tree SBX_FAKE_N levels deep (folder members for the first 16 levels, a file at the
    bottom: placing it makes every level), then, unless bad_sha is the way it fails, a FIFO:
    the transfer is refused at its end."""
    n = _n(5000)
    fifo = not getattr(a, "bad_sha", False)

    def chunks():
        for i in range(1, 17):
            yield member_dir("d/" * i, 0o555)
        yield member_file("d/" * n + "f", b"bottom")
        if fifo:
            yield tar_header("zz-fifo", b"6", 0)
        yield END_MARK

    _stream_download(a, chunks, bad_sha=not fifo)


def mode_wide(a):
    """SBX_FAKE_N folders side by side, each holding a file, then a FIFO (refused)."""
    n = _n(3000)
    fifo = not getattr(a, "bad_sha", False)

    def chunks():
        for i in range(n):
            yield member_dir("w%d/" % i, 0o555) + member_file("w%d/f" % i, b"x")
        if fifo:
            yield tar_header("zz-fifo", b"6", 0)
        yield END_MARK

    _stream_download(a, chunks, bad_sha=not fifo)


def mode_worst(a):
    """Every bound nearly reached in one download: folders whose names hold just under the
    state bound, a 64 MiB file (written by the write-behind threads), a sparse file with a map
    of 65,000 entries, a member with 500 KiB of xattr records and a 500 KiB name; accepted.
    The host's peak RSS with all of it is the figure docs/transfers.md gives."""
    prefix = _long_prefix(400 * 1024)
    dirs = _n(75)

    def chunks():
        for i in range(dirs):
            yield member_dir(prefix + "d%d" % i)
        yield tar_header("big", b"0", 64 << 20)
        block = b"b" * (1 << 20)
        for _ in range(64):
            yield block
        n = 65000
        sparse_map = b"%d\n" % n + b"".join(b"%d\n1\n" % (2 * i) for i in range(n))
        size = len(sparse_map) + (-len(sparse_map) % BLOCK) + n
        recs = [("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0"),
                ("GNU.sparse.name", "sparse"), ("GNU.sparse.realsize", str(2 * n))]
        yield pax_header(recs) + tar_header("GNUSparseFile.0/sparse", b"0", size)
        yield pad(sparse_map) + pad(b"s" * n)
        xattrs = [("SCHILY.xattr.user.a%d" % i, "v") for i in range(11500)]
        name = _long_prefix(100 * 1024) + "x"
        yield pax_header(xattrs + [("path", name)]) + tar_header("x", b"0", 1) + pad(b"x")
        yield END_MARK

    _stream_download(a, chunks)
