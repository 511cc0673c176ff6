"""Modes of the impersonated agent for the CLI's output (tests/cli_output.sh): every string the
host prints carries terminal escapes. Loaded by agent.py (its names are in scope here)."""

# ESC [ 2J (clear screen), OSC 52 (set the clipboard), CSI as a raw byte and as U+009B, DEL,
# invalid UTF-8, a NUL where the field can hold one, and a line break that forges a line.
EVIL = (b"\x1b[2J\x1b]52;c;cHduZWQ=\x07\x9b31m\xc2\x9b31m\x7f\xff\xfe\xc0\xaf"
        b"\nsbx: forged line\r")
# What a JSON string may hold raw and still parse: C1 as UTF-8, DEL, other UTF-8.
JSON_EVIL = b"\xc2\x9b31m\x7f\xc2\x85\xe2\x82\xac"


def mode_cli_hello(a):
    """HELLO's strings carry escapes (they are short fields: arch 16, version 32)."""
    a.hello["arch"] = b"x86\x1b[2J\xc2\x9b"
    a.hello["agent_version"] = b"0.1\x1b]52;c;eA==\x07\x9b"
    a.hello["kernel"] = EVIL


def mode_cli_stderr(a):
    """Writes escapes on stderr, then dies before HELLO: the host's error quotes the tail."""
    a.stderr_lines = [b"starting\n", EVIL.replace(b"\n", b" ") + b" last line\n"]

    def die():
        sys.exit(1)

    a.send_hello = die


def mode_cli_errors(a):
    """Every operation fails with a MESSAGE full of escapes."""
    def fail(agent, stream, fields):
        agent.respond(stream, err(2, EVIL, 5))

    for op in ("KIND", "STAT", "RESOLVE", "LANDS_CLEAR", "EXEC", "DOWNLOAD", "SUP_STATUS",
               "SUP_READ", "SUP_RUN", "SUP_SIGNAL", "AUTH", "SETUP"):
        a.handlers[OP[op]] = fail


def mode_cli_probes(a):
    """stat answers every path as a symlink whose target and type carry escapes (the path is
    the one asked, so it carries what the test put in it); an error entry's message too;
    resolve and lands-clear answer with escapes."""
    def stat(agent, stream, fields):
        m = ok()
        for i, p in enumerate(fall(fields, "PATH")):
            e = Msg().raw("PATH", p)
            if i % 2:
                e.i64("ERRNO", 2).raw("MESSAGE", EVIL)
            else:
                e.str("TYPE", "symlink").i64("MODE", 0o777).i64("UID_OF", 0).i64("GID_OF", 0)
                e.i64("SIZE", 1).i64("MTIME_NS", 0).raw("TARGET", EVIL)
            m.raw("ENTRY", e.bytes())
        agent.respond(stream, m)

    def resolve(agent, stream, fields):
        agent.respond(stream, ok().raw("PHYSICAL", fget(fields, "PATH") + EVIL))

    def lands(agent, stream, fields):
        agent.respond(stream, ok().i64("CLEAR", 0).raw("PHYSICAL", EVIL).raw("MESSAGE", EVIL))

    a.handlers[OP["STAT"]] = stat
    a.handlers[OP["RESOLVE"]] = resolve
    a.handlers[OP["LANDS_CLEAR"]] = lands


def mode_cli_exec(a):
    """exec: a user fallback NOTE with escapes, or (for `false`) not started with a MESSAGE."""
    def ex(agent, stream, fields):
        argv = fall(fields, "ARGV")
        agent.send_data(stream, 1, b"", end=True)
        agent.send_data(stream, 2, b"", end=True)
        m = ok().i64("PID", 4242).i64("DURATION_NS", 1000)
        if argv and argv[0] == b"false":
            m.i64("OUTCOME", 3).i64("CODE", 127).i64("ERRNO", 2).raw("MESSAGE", EVIL)
        else:
            m.i64("OUTCOME", 0).i64("CODE", 0).i64("USER_FALLBACK", 1).raw("NOTE", EVIL)
        agent.respond(stream, m)

    a.handlers[OP["EXEC"]] = ex


def mode_cli_sup(a):
    """Supervision: the state word and the receipt carry escapes (the receipt only what JSON
    allows raw, or the host refuses it before printing); the log too (raw by design: the test
    reads it under --json only). The receipt holds a NUL as \\u0000."""
    for s in ("/tmp/s", "/tmp/t"):
        a.files[(s, "receipt.json")] = (b'{"version":2,"status":0,"trigger":"exit","x":"' + JSON_EVIL +
                                        b'\\u0000"}\n')
        a.files[(s, "receipt.sig")] = b"00" * 32
        a.files[(s, "output.log")] = EVIL
    def status(agent, stream, fields):
        m = ok().raw("STATE", b"run\x1b[2J\xc2\x9b").i64("ALIVE", 0).i64("HAS_RECEIPT", 1)
        m.i64("ACTIVATION", 1).i64("SIZE", len(EVIL))
        agent.respond(stream, m)

    a.handlers[OP["SUP_STATUS"]] = status


def mode_cli_member(a):
    """A download whose member name is refused (it climbs out) and carries escapes."""
    bad = EVIL.replace(b"\n", b"").replace(b"\0", b"").decode("utf-8", "surrogateescape")
    a.tar = tar_of([member("../" + bad + "/x", data=b"x")])


def mode_cli_flood(a):
    """sbx output: the log's size is said to be 1 MiB, and every read answers all it asked
    for, forever: a host that reads until the agent stops sending never ends."""
    def read(agent, stream, fields):
        want = i64(fget(fields, "LENGTH", struct.pack(">q", 0)))
        agent.respond(stream, ok().i64("SIZE", 1 << 20).raw("BYTES", b"x" * max(want, 1)))

    a.handlers[OP["SUP_READ"]] = read


def mode_cli_overlong(a):
    """sbx output: a read answers more bytes than were asked."""
    def read(agent, stream, fields):
        want = i64(fget(fields, "LENGTH", struct.pack(">q", 0)))
        agent.respond(stream, ok().i64("SIZE", 1 << 30).raw("BYTES", b"y" * (want + 1)))

    a.handlers[OP["SUP_READ"]] = read


def mode_cli_record(a):
    """Records each SUP_RUN request's fields (hex tag=value lines) in $SBX_FAKE_RECORD."""
    def run(agent, stream, fields):
        with open(os.environ["SBX_FAKE_RECORD"], "a") as f:
            for tag, val in fields:
                f.write("%d=%s\n" % (tag, val.hex()))
        agent.respond(stream, ok().i64("PID", 4343))

    a.handlers[OP["SUP_RUN"]] = run
