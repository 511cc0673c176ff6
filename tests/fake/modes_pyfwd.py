"""A mode of the impersonated agent for the Python package's forwarding tests
(tests/python/test_forward.py): inward connections echoed. Loaded by agent.py (its names are
in scope here)."""

FWD_TAG, OPEN_FRAME = 195, 0x1F


def mode_fwd_in_prefix(a):
    """HELLO FWD = 1; every connection the host OPENs is answered with what it sent, prefixed
    by "echo:" once, and ended when the host's side ends."""
    a.hello_extra.append((FWD_TAG, struct.pack(">q", 1)))
    conns = set()

    def on_frame(a, ftype, flags, stream, payload):
        if ftype == OPEN_FRAME:
            conns.add(stream)
            a.send(DATA, stream, b"\x01echo:")
            return True
        if stream not in conns or ftype != DATA:
            return False
        if len(payload) > 1:
            a.send(DATA, stream, b"\x01" + payload[1:])
            a.send(CREDIT, stream, struct.pack(">BI", 0, len(payload) - 1))
        if flags & END:
            a.send(DATA, stream, b"\x01", END)
            conns.discard(stream)
        return True

    a.on_frame = on_frame
