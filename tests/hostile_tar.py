#!/usr/bin/env python3
"""hostile_tar.py OUTDIR HOSTDIR: writes one hostile tar archive per case of
../shared/reference/adversarial.md ("Archives") that must be refused as a whole. HOSTDIR
holds `victim` and `outside/`; absolute names aim at them. Every archive first holds a
harmless file, so a refusal must also leave that one out of the target."""
import io
import os
import sys
import tarfile

out, host = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)


def member(name, kind=tarfile.REGTYPE, data=b"x", link="", mode=0o644, pax=None):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.linkname = link
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
    if pax:
        ti.pax_headers = dict(pax)
    return ti, (io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def write(case, members, fmt=tarfile.PAX_FORMAT):
    with tarfile.open(os.path.join(out, case + ".tar"), "w", format=fmt) as t:
        for ti, f in [member("harmless")] + members:
            t.addfile(ti, f)


victim = os.path.join(host, "victim")
outside = os.path.join(host, "outside")
write("01-absolute", [member(victim)])
write("01-double-slash", [member("/" + victim)])
write("02-dotdot", [member("../victim")])
write("02-dotdot-deep", [member("a/../../victim")])
write("02-dotdot-inside", [member("a/../b")])
write("03-pax-path", [member("harmless2", pax={"path": "../../victim"})])
write("03-gnu-longname", [member("../" * 40 + "victim")], fmt=tarfile.GNU_FORMAT)
write("04-empty-name", [member("")])
write("04-dot-file", [member(".")])
write("04-dot-symlink", [member("./", tarfile.SYMTYPE, link=outside)])
write("05-symlink-then-through", [member("tmp", tarfile.SYMTYPE, link=outside), member("tmp/x")])
write("06-cur-par", [member("cur", tarfile.SYMTYPE, link="."),
                     member("par", tarfile.SYMTYPE, link="cur/.."), member("par/x")])
chain = []
for i in range(40):
    chain.append(member("l%d" % i, tarfile.SYMTYPE,
                        link=("l%d/" % (i - 1) if i else "") + "d" * 200))
write("08-deep-symlink-chain", chain + [member("l39/x")])
write("10-dir-then-symlink", [member("dir1", tarfile.DIRTYPE, mode=0o555),
                              member("dir1", tarfile.SYMTYPE, link=outside)])
write("11-hardlink-absolute", [member("h", tarfile.LNKTYPE, link=victim)])
write("11-hardlink-dotdot", [member("h", tarfile.LNKTYPE, link="../victim")])
write("11-hardlink-through-symlink", [member("s", tarfile.SYMTYPE, link=host),
                                      member("h", tarfile.LNKTYPE, link="s/victim")])
write("11-hardlink-to-dir", [member("d", tarfile.DIRTYPE, mode=0o755),
                             member("h", tarfile.LNKTYPE, link="d")])
write("11-hardlink-to-itself", [member("h", tarfile.LNKTYPE, link="h")])
write("13-fifo", [member("fifo", tarfile.FIFOTYPE)])
write("13-chardev", [member("null", tarfile.CHRTYPE)])
write("13-blockdev", [member("sda", tarfile.BLKTYPE)])
write("13-unknown-type", [member("odd", b"Z")])
write("19-file-over-dir", [member("d", tarfile.DIRTYPE, mode=0o755), member("d/f"), member("d")])
write("19-dir-over-file", [member("f"), member("f", tarfile.DIRTYPE, mode=0o755)])
