"""An impersonated agent that serves inward connections (tests/forward.sh h): every OPEN from
the host is served as tests/bench/fwdload.py's server would be (first byte E: an echo, what
comes on channel 0 goes back on channel 1; S: a sink, its count answered after END; END
answered with END; Z: zeros sent for ever, within the host's credit), but one to port 81, which is refused with a RESET as a real agent's
failed connect is. So the
host's side of `sbx forward --in` meets real TCP clients without a sandbox. Loaded by agent.py
(its names are in scope here; OPEN, RESET and FT come from modes_fwd.py)."""


def zeros(a, stream, n):
    while n > 0:
        k = min(n, 65536)
        a.send(DATA, stream, b"\x01" + bytes(k))
        n -= k


def mode_fwd_in_echo(a):
    a.hello_extra.append((195, struct.pack(">q", 1)))  # HELLO FWD = 1
    conns = {}  # stream -> [mode byte or None, bytes counted]

    def on_frame(a, ftype, flags, stream, payload):
        if ftype == 0x1F:  # OPEN
            port = i64(fget(parse(payload), "FWD_PORT"))
            if port == 81:
                conns[stream] = None
                a.send(0x1E, stream, Msg().i64("ERRNO", 111).str(
                    "MESSAGE", "connect 127.0.0.1:81: Connection refused"))
            else:
                conns[stream] = [None, 0]
            return True
        if stream not in conns:
            return False
        if ftype == 0x1E:  # RESET: answered once, the id forgotten
            conns.pop(stream, None)
            if payload:
                a.send(0x1E, stream, b"")
            return True
        if ftype == DATA:
            c, data = conns[stream], payload[1:]
            if data:
                a.send(CREDIT, stream, struct.pack(">BI", 0, len(data)))
            if data and c[0] is None:
                c[0], data = data[:1], data[1:]
                if c[0] == b"Z":
                    zeros(a, stream, 256 * 1024)
            if c[0] == b"S":
                c[1] += len(data)
            elif data:
                a.send(DATA, stream, b"\x01" + data)
            if flags & END:
                if c[0] == b"S":
                    a.send(DATA, stream, b"\x01" + struct.pack(">Q", c[1]))
                a.send(DATA, stream, b"\x01", END)
                conns.pop(stream)
            return True
        if ftype == CREDIT:
            chan, n = struct.unpack(">BI", payload)
            if conns[stream] is not None and conns[stream][0] == b"Z" and chan == 1:
                zeros(a, stream, n)
            return True
        return False

    a.on_frame = on_frame
