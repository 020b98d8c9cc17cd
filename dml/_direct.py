"""A direct channel between the tasks of a collective run: sockets from task thread to task thread.

Through the worker's own connections (:class:`dml._collective.Link`'s handler transport) every
message goes task thread -> the sender worker's event loop -> TCP -> the receiver worker's event
loop -> a condition variable -> the task thread: two event loops and four hand-overs of the
interpreter lock, a few milliseconds per message on a loaded machine, and a growth wave of
gradient boosting waits for one such message. Here each task of a run opens a listening TCP
socket of its own (and a Unix socket, which peers on the same host use instead), the addresses
are swapped once per run through the handler transport, and every step's partials then go over
non-blocking sockets that the task threads read and write themselves (LightGBM's Dask interface
does the same with its own sockets). A frame goes out in one gathering write; a reader takes
headers and descriptions through a small buffer and payloads straight into their arrays.

What crosses the wire is never unpickled: a partial is flattened into a JSON description of its
structure (tuples, lists, dicts, numbers, strings, None) and the raw bytes of its numpy arrays,
whose dtypes come from a fixed list and whose sizes are checked against the frame's declared
length (bounded by :data:`MAX_PAYLOAD`). A value the encoding cannot carry (any other type)
goes through the handler transport instead, announced by a marker frame. Descriptions are cached
on both sides (by the structure's signature when sending, as a plan to build the value when
receiving): a run sends a few structures over and over. Every listening socket
has its own random token, sent to the peers through the handler transport: a connection that
does not present it within :data:`HELLO_TIMEOUT` is closed (a stranger cannot inject partials).
A frame that does not parse raises :class:`ChannelError` with what was wrong.
"""
from __future__ import annotations

import errno
import functools
import hmac
import json
import secrets
import selectors
import socket
import struct
import sys
import time

import numpy as np

MAGIC = b"DMLd"
TOKEN_BYTES = 16
#: A connection's first bytes: magic, the listener's token, the connecting group.
HELLO = struct.Struct("!4s16sI")
#: A frame: magic, kind, step, sending group, length of the JSON description, of the payload.
FRAME = struct.Struct("!4sBqIIQ")
KIND_DATA, KIND_HANDLER = 0, 1
#: Largest JSON description and payload of one frame (bytes).
MAX_META = 1 << 22
MAX_PAYLOAD = 1 << 34
#: Seconds a new connection has to present its token; seconds for all peers to connect.
HELLO_TIMEOUT = 5.0
CONNECT_TIMEOUT = 30.0
#: Socket buffer sizes asked for (bytes; the system may cap them): a wave's histograms (up
#: to a few MB) then go in one write and are read in few wake-ups.
SOCKET_BUFFER = 4 << 20
_ALIGN = 64  # arrays start at multiples of this in a payload (numba wants aligned arrays)
_PAD = bytes(_ALIGN)
#: Most chunks an array is sent in without a copy (a gathering write takes at most 1024).
_MAX_CHUNKS = 64
#: Buffers per gathering write (``sendmsg``; the system's limit is 1024).
_IOV = 512
#: Bytes read at once while a frame's header and description are read: a small frame comes
#: in one read, a large one's payload then goes straight into its own array.
_SCRATCH = 1 << 15
_DTYPES = {np.dtype(t).str: np.dtype(t) for t in (
    "?", "i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f4", "<f8", "<c8", "<c16")}


class ChannelError(RuntimeError):
    """A frame on a direct channel is malformed (or a peer broke the protocol)."""


class PeerGone(ConnectionError):
    """A peer's connection closed or failed while the run needed it."""


# ------------------------------------------------------------------------------ encoding
#: Descriptions of the structures encoded before, by their signature (:func:`_signature`):
#: the steps of a run send a few structures over and over (a group's share of a wave's
#: histograms differs only in its number of nodes). At most :data:`_META_KEEP` are kept.
_META: dict = {}
_META_KEEP = 1024


class _Uncached(Exception):
    """A value whose description is not looked up by signature (it is encoded in full)."""


def _signature(o, arrays):
    """A hashable key that determines the description of ``o`` (its structure, array shapes
    and dtypes, and its other values, tagged by type), appending its arrays to ``arrays`` in the
    order :func:`encode` lists them. Exact types only: anything else raises
    :class:`_Uncached`."""
    t = type(o)
    if t is np.ndarray:
        arrays.append(o)
        return ("a", o.shape, o.dtype.str)
    if t is tuple:
        return ("t",) + tuple([_signature(v, arrays) for v in o])
    if t is dict:
        return ("m",) + tuple([(_signature(k, arrays), _signature(v, arrays))
                               for k, v in o.items()])
    if t is int or t is str:
        return (t, o)
    if o is None or t is bool:
        return o
    if t is list:
        return ("l",) + tuple([_signature(v, arrays) for v in o])
    if t is float:
        return ("f", o.hex())  # 0.0 and -0.0 are equal but described apart
    if isinstance(o, np.generic):  # a numpy scalar travels as an array: its value is not described
        a = np.asarray(o)
        arrays.append(a)
        return ("x", a.dtype.str)
    raise _Uncached


def encode(obj):
    """``(description, arrays)``: the JSON description of ``obj`` and its arrays in order.
    Raises TypeError for a value the channel does not carry. A structure seen before is
    described from :data:`_META` (no JSON written)."""
    arrays: list = []
    try:
        key = _signature(obj, arrays)
    except (_Uncached, RecursionError):
        key = None
    else:
        meta = _META.get(key)
        if meta is not None:
            return meta, arrays
    meta, arrays = _encode(obj)
    if key is not None:
        if len(_META) >= _META_KEEP:
            _META.clear()
        _META[key] = meta
    return meta, arrays


def _encode(obj):
    """:func:`encode` in full: the description written as JSON."""
    arrays: list = []

    def enc(o):
        if o is None or isinstance(o, (bool, str)):
            return o if not isinstance(o, str) else {"s": o}
        if isinstance(o, int) and not isinstance(o, np.integer):
            return {"i": o}
        if type(o) is float:
            return {"f": o}
        if isinstance(o, (np.ndarray, np.generic)):
            a = np.asarray(o)
            if a.dtype.str not in _DTYPES:
                raise TypeError(f"dtype {a.dtype} is not carried")
            arrays.append(a)
            return {"a": list(a.shape), "d": a.dtype.str, "x": isinstance(o, np.generic)}
        if isinstance(o, tuple):
            return {"t": [enc(v) for v in o]}
        if isinstance(o, list):
            return {"l": [enc(v) for v in o]}
        if type(o) is dict:
            return {"m": [[enc(k), enc(v)] for k, v in o.items()]}
        raise TypeError(f"{type(o).__name__} is not carried")

    return json.dumps(enc(obj), separators=(",", ":")).encode(), arrays


def _layout(arrays_meta):
    """Offsets of the arrays in a payload and its length."""
    offsets, pos = [], 0
    for nbytes in arrays_meta:
        offsets.append(pos)
        pos += -(-nbytes // _ALIGN) * _ALIGN
    return offsets, pos


def _chunks(a):
    """Memoryviews covering array ``a``'s bytes in C order, without a copy when ``a`` is
    contiguous or a slice along its second axis of a contiguous array (a group's feature share
    of histograms ``(nodes, features, bins, 3)``: one contiguous chunk a node); a copy
    otherwise."""
    if not a.flags.c_contiguous and a.ndim >= 2 and 0 < a.shape[0] <= _MAX_CHUNKS \
            and a[0].flags.c_contiguous:
        return [memoryview(r).cast("B") for r in a]
    return [memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B")]


def frame(step, sender, obj):
    """The buffers of one data frame (header, description, arrays with padding), for one
    gathering write. Raises TypeError for a value the channel does not carry."""
    meta, arrays = encode(obj)
    sizes = [a.nbytes for a in arrays]
    offsets, total = _layout(sizes)
    if len(meta) > MAX_META or total > MAX_PAYLOAD:
        raise TypeError("too large for a frame")
    bufs = [FRAME.pack(MAGIC, KIND_DATA, step, sender, len(meta), total) + meta]
    for a, n in zip(arrays, sizes):
        if n:
            bufs.extend(_chunks(a))
        pad = -(-n // _ALIGN) * _ALIGN - n
        if pad:
            bufs.append(_PAD[:pad])
    return bufs


def marker(step, sender):
    """A frame saying that this step's partial comes through the handler transport."""
    return [FRAME.pack(MAGIC, KIND_HANDLER, step, sender, 0, 0)]


def parse_header(raw):
    """``(kind, step, sender, meta length, payload length)`` of a frame header; raises
    :class:`ChannelError` for a header that is not one."""
    magic, kind, step, sender, n_meta, n_payload = FRAME.unpack(raw)
    if magic != MAGIC or kind not in (KIND_DATA, KIND_HANDLER):
        raise ChannelError("direct channel: a frame header is garbled (bad magic or kind)")
    if n_meta > MAX_META or n_payload > MAX_PAYLOAD:
        raise ChannelError(f"direct channel: a frame declares {n_meta} + {n_payload} bytes, "
                           f"over the limits ({MAX_META} + {MAX_PAYLOAD})")
    return kind, step, sender, n_meta, n_payload


def _parse(meta):
    """A frame's description and the sizes of its arrays."""
    try:
        spec = json.loads(meta)
    except (ValueError, RecursionError) as exc:
        raise ChannelError(f"direct channel: a frame's description is garbled ({exc})") from exc
    sizes: list = []

    def check(s):  # the arrays' sizes first, so no view is made of a payload that is short
        if isinstance(s, dict) and "a" in s:
            shape, dt = s["a"], _DTYPES.get(s.get("d"))
            if (dt is None or not isinstance(shape, list)
                    or not all(type(n) is int and n >= 0 for n in shape)):
                raise ChannelError("direct channel: a frame describes an invalid array")
            sizes.append(int(np.prod(shape, dtype=object)) * dt.itemsize)
        elif isinstance(s, dict):
            for v in s.values():
                if isinstance(v, list):
                    for x in v:
                        check(x)
        elif isinstance(s, list):
            for x in s:
                check(x)

    try:
        check(spec)
    except RecursionError as exc:
        raise ChannelError("direct channel: a frame's description is nested too deep") from exc
    return spec, tuple(sizes)


def _compile(spec):
    """``(build, arrays)`` of a parsed description: ``build(values)`` makes the value from
    its arrays (in order), ``arrays`` lists each one's dtype, shape and whether it is a numpy
    scalar. Raises :class:`ChannelError` when the description is not valid."""
    arrays: list = []

    def const(v):
        return lambda a: v

    def comp(s):
        if s is None or isinstance(s, bool):
            return const(s)
        if not isinstance(s, dict) or len(s) not in (1, 3):
            raise ChannelError("direct channel: a frame's description is garbled")
        if "a" in s:
            i = len(arrays)
            arrays.append((_DTYPES[s["d"]], tuple(s["a"]), bool(s.get("x"))))
            return lambda a: a[i]
        (k, v), = s.items()
        if k == "s" and isinstance(v, str):
            return const(v)
        if k == "i" and type(v) is int:
            return const(v)
        if k == "f" and isinstance(v, (int, float)):
            return const(float(v))
        if k in ("t", "l", "m") and isinstance(v, list):
            if k == "t":
                fs = [comp(x) for x in v]
                return lambda a: tuple([f(a) for f in fs])
            if k == "l":
                fs = [comp(x) for x in v]
                return lambda a: [f(a) for f in fs]
            if all(isinstance(kv, list) and len(kv) == 2 for kv in v):
                pairs = [(comp(kv[0]), comp(kv[1])) for kv in v]
                return lambda a: {_hashable(kf(a)): vf(a) for kf, vf in pairs}
        raise ChannelError("direct channel: a frame's description is garbled")

    try:
        build = comp(spec)
    except RecursionError as exc:
        raise ChannelError("direct channel: a frame's description is nested too deep") from exc
    except (ValueError, TypeError, KeyError) as exc:
        raise ChannelError(f"direct channel: a frame's description is garbled ({exc!r})") from exc
    return build, arrays


def _plan(meta):
    """How to decode the frames of description ``meta``: ``(build, arrays, payload length)``,
    ``build`` as :func:`_compile` makes it and ``arrays`` as ``(dtype, count, offset, shape,
    scalar)`` in the payload."""
    spec, sizes = _parse(meta)
    build, arrays = _compile(spec)
    offsets, total = _layout(sizes)
    arrays = [(dt, n // dt.itemsize, off, shape, scalar)
              for (dt, shape, scalar), n, off in zip(arrays, sizes, offsets)]
    return build, arrays, total


#: :func:`_plan` of short descriptions, cached: the steps of a run send partials of a few
#: structures over and over (a plan is never modified once made).
_plan_short = functools.lru_cache(maxsize=256)(_plan)


def decode(meta, payload):
    """The value of a data frame; raises :class:`ChannelError` when the description is not
    valid or does not match the payload."""
    build, arrays, total = (_plan_short if len(meta) <= 4096 else _plan)(meta)
    if total != len(payload):
        raise ChannelError(f"direct channel: a frame's arrays take {total} bytes, its payload "
                           f"has {len(payload)}")
    try:
        values = []
        for dt, count, offset, shape, scalar in arrays:
            a = np.frombuffer(payload, dtype=dt, count=count, offset=offset).reshape(shape)
            values.append(a[()] if scalar else a)
        return build(values)
    except RecursionError as exc:
        raise ChannelError("direct channel: a frame's description is nested too deep") from exc
    except (ValueError, TypeError) as exc:
        raise ChannelError(f"direct channel: a frame's description is garbled ({exc!r})") from exc


def _hashable(k):
    try:
        hash(k)
    except TypeError:
        raise ChannelError("direct channel: a frame's description has an invalid key") from None
    return k


# ------------------------------------------------------------------------------ reading
class _Reader:
    """Reads one peer's frames as bytes arrive. Headers and descriptions are read through a
    scratch buffer (a small frame, or several, in one read); a payload goes into an array of
    its own, the part beyond what the scratch buffer holds read straight into it."""

    def __init__(self, sock):
        self.sock = sock
        self.scratch = bytearray(_SCRATCH)
        self.sview = memoryview(self.scratch)
        self.lo = self.hi = 0  # the scratch buffer's bytes not yet used
        self.head = None  # the header of the frame being read
        self.meta = None  # its description, once read
        self.body = None  # its payload's array, and how much of it is filled
        self.pos = 0
        self.closed = False

    def _recv(self, view):
        """Read into ``view``; the number of bytes, or None when none is there now."""
        try:
            n = self.sock.recv_into(view)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            n = 0
        if n == 0:  # the frames read so far still count (a peer that finished)
            self.closed = True
        return n

    def _fill(self, n):
        """Whether the scratch buffer holds ``n`` (at most :data:`_SCRATCH`) unused bytes,
        reading once if not; None when nothing more can be read now."""
        if self.hi - self.lo >= n:
            return True
        if self.lo:  # the unused bytes to the front: the rest of the buffer is free
            k = self.hi - self.lo
            self.sview[:k] = self.sview[self.lo:self.hi]
            self.lo, self.hi = 0, k
        got = self._recv(self.sview[self.hi:])
        if not got:
            return None
        self.hi += got
        return self.hi - self.lo >= n

    def feed(self):
        """Read what is there; returns the frames completed as ``(kind, step, sender,
        value)``; :attr:`closed` is set at the end of the stream. Returns once a frame is
        complete and no read byte is left over, rather than ask the socket once more (the
        caller's wait asks the selector if it needs more)."""
        out = []
        while True:
            if self.head is None:
                ok = self._fill(FRAME.size)
                if not ok:
                    if ok is None:
                        return out
                    continue
                self.head = parse_header(self.sview[self.lo:self.lo + FRAME.size])
                self.lo += FRAME.size
                self.meta = None
            kind, step, sender, n_meta, n_payload = self.head
            if self.meta is None:
                if n_meta <= _SCRATCH:
                    ok = self._fill(n_meta)
                    if not ok:
                        if ok is None:
                            return out
                        continue
                    self.meta = bytes(self.sview[self.lo:self.lo + n_meta])
                    self.lo += n_meta
                else:  # a long description: read into a buffer of its own, as a payload
                    if not self._take(n_meta):
                        return out
                    self.meta = bytes(self.body)
                    self.body = None
            if n_payload:
                if not self._take(n_payload):
                    return out
                payload, self.body = self.body, None
            else:
                payload = b""
            self.head = None
            out.append((kind, step, sender,
                        decode(self.meta, payload) if kind == KIND_DATA else None))
            if self.lo == self.hi:
                self.lo = self.hi = 0
                return out

    def _take(self, n):
        """Whether :attr:`body`, an array of ``n`` bytes, is filled: first from the scratch
        buffer, then straight from the socket."""
        if self.body is None:
            self.body = np.empty(n, dtype=np.uint8)
            self.pos = 0
        view = memoryview(self.body)
        k = min(self.hi - self.lo, n - self.pos)
        if k:
            view[self.pos:self.pos + k] = self.sview[self.lo:self.lo + k]
            self.lo += k
            self.pos += k
        while self.pos < n:
            got = self._recv(view[self.pos:])
            if not got:
                return False
            self.pos += got
        return True


# ------------------------------------------------------------------------------ the channel
def _host(address):
    from distributed.comm.addressing import parse_address, parse_host_port

    _, loc = parse_address(address)
    return parse_host_port(loc)[0]


def _buffers(sock):
    """Large buffers, set before the connection exists (the window scale is agreed then)."""
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        except OSError:
            pass


#: Whether groups on the same host connect over a Unix socket (:func:`_local_socket`) rather
#: than TCP.
LOCAL = True


def _local_socket():
    """``(socket, name)``: a listening Unix socket with a random name in the abstract namespace
    (Linux), or ``(None, None)`` where there is none. Peers on the same host connect to it
    rather than over TCP: the system then only copies the bytes, without the TCP stack's work
    on both sides (about a third of the CPU time per 256 KiB written and read, on Linux)."""
    if not LOCAL or not sys.platform.startswith("linux") or not hasattr(socket, "AF_UNIX"):
        return None, None
    name = "\0dml-direct-" + secrets.token_hex(16)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _buffers(sock)
        sock.bind(name)
        sock.listen(64)
        sock.setblocking(False)
    except OSError:
        sock.close()
        return None, None
    return sock, name


class Listener:
    """A group's listening sockets and token: TCP on the host of its worker's address, and a
    Unix socket for peers on the same host where the system has them."""

    def __init__(self, address):
        host = _host(address)
        family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            _buffers(self.sock)
            self.sock.bind((host, 0))
            self.sock.listen(64)
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            raise
        self.host, self.port = host, self.sock.getsockname()[1]
        self.local, self.local_name = _local_socket()
        self.token = secrets.token_bytes(TOKEN_BYTES)

    def card(self):
        """What peers need to connect: host, port, token (hex) and the name of the Unix
        socket (None: none)."""
        return self.host, self.port, self.token.hex(), self.local_name

    def close(self):
        self.sock.close()
        if self.local is not None:
            self.local.close()


def connect(card, g, timeout=CONNECT_TIMEOUT, host=None):
    """A connection to a peer's listener (``card``), introduced as group ``g``: over its Unix
    socket when the peer's host is ``host`` (this worker's) and the socket can be reached
    (another machine or network namespace cannot: then over TCP)."""
    peer, port, token, local = (tuple(card) + (None,))[:4]
    sock = None
    if local is not None and host is not None and peer == host:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _buffers(sock)
            sock.settimeout(timeout)
            sock.connect(local)
        except OSError:
            sock.close()
            sock = None
    if sock is None:
        family = socket.getaddrinfo(peer, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            _buffers(sock)
            sock.settimeout(timeout)
            sock.connect((peer, port))
        except OSError:
            sock.close()
            raise
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(HELLO.pack(MAGIC, bytes.fromhex(token), g))
    sock.setblocking(False)
    return sock


def accept(listener, expected, stop, timeout=CONNECT_TIMEOUT, hello_timeout=HELLO_TIMEOUT):
    """``{group: socket}`` once every group in ``expected`` connected with the listener's
    token. Connections with a wrong token, an unknown or repeated group or no hello within
    ``hello_timeout`` are closed. ``stop()`` is called between waits: a true result ends the
    wait (returns None), as does ``timeout``."""
    sel = selectors.DefaultSelector()
    listening = [s for s in (listener.sock, listener.local) if s is not None]
    for s in listening:
        sel.register(s, selectors.EVENT_READ)
    pending: dict = {}  # socket -> (bytes so far, time of connection)
    got: dict = {}
    deadline = time.monotonic() + timeout
    try:
        while set(got) != set(expected):
            now = time.monotonic()
            if now > deadline or stop():
                return None
            for s, (_, t0) in list(pending.items()):
                if now - t0 > hello_timeout:
                    sel.unregister(s)
                    s.close()
                    del pending[s]
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                if s in listening:
                    try:
                        conn, _ = s.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    conn.setblocking(False)
                    pending[conn] = (b"", time.monotonic())
                    sel.register(conn, selectors.EVENT_READ)
                    continue
                have, t0 = pending[s]
                try:
                    more = s.recv(HELLO.size - len(have))
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    more = b""
                have += more
                if more and len(have) < HELLO.size:
                    pending[s] = (have, t0)
                    continue
                sel.unregister(s)
                del pending[s]
                h = _valid_hello(have, listener.token)
                if h is None or h not in expected or h in got:
                    s.close()  # a stranger, a stale run's peer or a garbled hello
                    continue
                if s.family != getattr(socket, "AF_UNIX", None):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                got[h] = s
        result, got = got, {}
        return result
    finally:
        for s in list(pending) + list(got.values()):
            s.close()
        sel.close()


def _valid_hello(raw, token):
    if len(raw) != HELLO.size:
        return None
    magic, tok, h = HELLO.unpack(raw)
    if magic != MAGIC or not hmac.compare_digest(tok, token):
        return None
    return h


class Channel:
    """A group's connections to the groups on other workers: ``out[h]`` carries this group's
    frames to group ``h``, ``inc[h]`` group ``h``'s frames to this group."""

    def __init__(self, out, inc):
        self.out, self.inc = out, inc
        self.readers = {h: _Reader(s) for h, s in inc.items()}
        self.sel = selectors.DefaultSelector()
        for h, s in inc.items():
            self.sel.register(s, selectors.EVENT_READ, ("r", h))
        self.writes: dict = {h: [] for h in out}  # h -> memoryviews still to send
        self.writing: set = set()  # the peers whose sockets are registered for writing
        self.inbox: dict = {}  # (step, sender) -> (kind, value)

    def post(self, bufs, to=None):
        """Queue a frame (its buffers) to every peer (or only to group ``to``) and send what
        goes without waiting."""
        for h in (self.out if to is None else [to]):
            self.writes[h].extend(memoryview(b).cast("B") for b in bufs)
            self._write(h)

    def _write(self, h):
        # One gathering write (``sendmsg``) for all the queued buffers, not a write each.
        q, s = self.writes[h], self.out[h]
        gather = hasattr(s, "sendmsg")  # not on Windows: a write a buffer there
        while q:
            batch = q[:_IOV] if gather else q[:1]
            try:
                n = s.sendmsg(batch) if gather else s.send(batch[0])
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                raise PeerGone(str(exc)) from exc
            full = n == sum(map(len, batch))
            i = 0
            while i < len(batch) and n >= len(batch[i]):
                n -= len(batch[i])
                i += 1
            del q[:i]
            if n:
                q[0] = q[0][n:]
            if not full:  # the socket's buffer is full: on when it can take more
                break
        self._want_write(h, bool(q))

    def _want_write(self, h, want):
        # Registration kept in a set: asking the selector raises a KeyError whose message
        # formats the socket, a cost paid on every step.
        if want and h not in self.writing:
            self.sel.register(self.out[h], selectors.EVENT_WRITE, ("w", h))
            self.writing.add(h)
        elif not want and h in self.writing:
            self.sel.unregister(self.out[h])
            self.writing.discard(h)

    def wait(self, need, poll, check):
        """Read until the frames ``need`` (``{(step, sender)}``) are in :attr:`inbox` and every
        queued frame is sent. ``check()`` runs whenever ``poll`` seconds pass without a frame
        (it raises to end the wait)."""
        while not (need <= self.inbox.keys()) or any(self.writes.values()):
            events = self.sel.select(timeout=poll)
            if not events:
                check()
                continue
            for key, _ in events:
                kind, h = key.data
                if kind == "w":
                    self._write(h)
                    continue
                reader = self.readers[h]
                for fk, step, sender, value in reader.feed():
                    if sender != h:
                        raise ChannelError(f"direct channel: group {h}'s connection carried a "
                                           f"frame of group {sender}")
                    self.inbox[(step, sender)] = (fk, value)
                if reader.closed:
                    self.sel.unregister(reader.sock)
            gone = {h for _, h in need - self.inbox.keys() if self.readers[h].closed}
            if gone:
                raise PeerGone(f"the connection of group {min(gone)} closed")

    def close(self):
        self.sel.close()
        for s in list(self.out.values()) + list(self.inc.values()):
            try:
                s.close()
            except OSError as exc:  # pragma: no cover - closing never fails on Linux
                if exc.errno != errno.EBADF:
                    raise
