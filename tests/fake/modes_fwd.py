"""Modes of the impersonated agent for TCP forwarding (tests/fwd_impostor.sh): a well-behaved
forwarder for one connection, and one mode per rule of docs/forwarding.md section 7 it breaks.
Loaded by agent.py (its names are in scope here)."""

OPEN, RESET = 0x1F, 0x1E
FT = dict(FWD_PORT=190, READY_FILE=191, MAX_CONN=192, ADDR=193, LISTENER=194, FWD=195)
T.update(FT)
OP_FWD_LISTEN = 62
AGENT_ID = 0x80000001


def fwd_hello(a):
    a.hello_extra.append((FT["FWD"], struct.pack(">q", 1)))


def on_listen(a, then):
    """FWD_LISTEN answered at once (the ready file made on the host's disk: a fake agent has
    no sandbox), then `then(a, stream, port)` plays the mode's frames."""

    def h(a, stream, fields):
        port = i64(fget(fields, "FWD_PORT"))
        ready = fget(fields, "READY_FILE")
        if ready:
            open(ready, "wb").close()
        a.respond(stream, ok())
        then(a, stream, port)

    a.handlers[OP_FWD_LISTEN] = h


def open_conn(a, listener, port, cid=AGENT_ID):
    a.send(OPEN, cid, Msg().i64("LISTENER", listener).i64("FWD_PORT", port))


def mode_fwd_echo(a, out_path):
    """One connection: sends "ping\\n" and END, writes what comes back to out_path at its END,
    then answers the host's END-ended stream as done."""
    fwd_hello(a)
    got = bytearray()

    def then(a, stream, port):
        open_conn(a, stream, port)
        a.send(DATA, AGENT_ID, b"\x01ping\n")
        # END on its own once the host has written the bytes out (its buffer freed): the
        # empty DATA once met a NULL buffer (a UBSan report under SAN=1)
        time.sleep(0.5)
        a.send(DATA, AGENT_ID, b"\x01", END)

    def on_frame(a, ftype, flags, stream, payload):
        if stream != AGENT_ID or ftype != DATA:
            return False
        got.extend(payload[1:])
        if len(payload) > 1:
            a.send(CREDIT, stream, struct.pack(">BI", 0, len(payload) - 1))
        if flags & END:
            with open(out_path, "wb") as f:
                f.write(bytes(got))
        return True

    on_listen(a, then)
    a.on_frame = on_frame


def mode_fwd_none(a):
    """HELLO without FWD: an agent from before forwarding."""


def mode_fwd_open_unasked(a):
    """OPEN naming a listener the host never asked for."""
    fwd_hello(a)
    on_listen(a, lambda a, s, p: open_conn(a, s + 1000, p))


def mode_fwd_open_port(a):
    """OPEN on an inside port the host did not ask to listen on."""
    fwd_hello(a)
    on_listen(a, lambda a, s, p: open_conn(a, s, p % 65535 + 1))


def mode_fwd_open_hostid(a):
    """OPEN on a stream id of the host's range (bit 31 clear)."""
    fwd_hello(a)
    on_listen(a, lambda a, s, p: open_conn(a, s, p, cid=7))


def mode_fwd_open_twice(a):
    """Two OPENs on one id."""
    fwd_hello(a)

    def then(a, s, p):
        open_conn(a, s, p)
        open_conn(a, s, p)

    on_listen(a, then)


def mode_fwd_overrun(a):
    """DATA past the connection's 256 KiB window, no CREDIT waited for."""
    fwd_hello(a)

    def then(a, s, p):
        open_conn(a, s, p)
        for _ in range(5):
            a.send(DATA, AGENT_ID, b"\x01" + b"x" * 65536)

    on_listen(a, then)


def mode_fwd_bad_channel(a):
    """DATA on channel 2 of a connection."""
    fwd_hello(a)

    def then(a, s, p):
        open_conn(a, s, p)
        a.send(DATA, AGENT_ID, b"\x02boo")

    on_listen(a, then)


def mode_fwd_data_unknown(a):
    """DATA on an agent id that was never opened."""
    fwd_hello(a)
    on_listen(a, lambda a, s, p: a.send(DATA, AGENT_ID + 5, b"\x01boo"))


def mode_fwd_evil_reset(a):
    """A connection reset with a reason full of terminal escapes; the session goes on."""
    fwd_hello(a)

    def then(a, s, p):
        open_conn(a, s, p)
        a.send(RESET, AGENT_ID, Msg().i64("ERRNO", 104).raw("MESSAGE",
               b"\x1b[2J\x1b]52;c;cHduZWQ=\x07\x9b31m\xc2\x9b\x7f\xff\nsbx: forged line"))

    on_listen(a, then)


def mode_fwd_flood(a, n="6"):
    """n OPENs at once, then DATA on each (the host refuses those past its limit with RESET;
    what was sent on them before that RESET arrives is dropped, not a protocol error), then the
    RESETs that answer the host's."""
    fwd_hello(a)
    ids = [AGENT_ID + i for i in range(int(n))]

    def then(a, s, p):
        for cid in ids:
            open_conn(a, s, p, cid)
        for cid in ids:
            a.send(DATA, cid, b"\x01hello")

    def on_frame(a, ftype, flags, stream, payload):
        if ftype == RESET and stream in ids:
            a.send(RESET, stream, b"")  # the answer: the id is free on both sides
            return True
        return False

    on_listen(a, then)
    a.on_frame = on_frame
