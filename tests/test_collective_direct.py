"""The direct channel between the tasks of a collective run (dml._direct, dml._collective.Link):
values cross bit for bit without pickle, strangers and garbled frames are refused with a clear
error and never hang a run, and on a real multi-process cluster a run whose peer is gone or
that is abandoned ends with RunLost (the client then submits it again)."""
from __future__ import annotations

import socket
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from dml import _collective, _direct


def _pair():
    """Two connected channels (groups 0 and 1) on this host, as two tasks would make them:
    group 0 writes over the Unix socket (peers on the same host), group 1 over TCP."""
    lis = [_direct.Listener("tcp://127.0.0.1:1") for _ in range(2)]
    out0 = _direct.connect(lis[1].card(), 0, host="127.0.0.1")
    out1 = _direct.connect(lis[0].card(), 1)
    assert out1.family != getattr(socket, "AF_UNIX", None)
    assert out0.family == socket.AF_UNIX or not sys.platform.startswith("linux")
    inc0 = _direct.accept(lis[0], {1}, lambda: False, timeout=10)
    inc1 = _direct.accept(lis[1], {0}, lambda: False, timeout=10)
    for li in lis:
        li.close()
    return _direct.Channel({1: out0}, inc0), _direct.Channel({0: out1}, inc1)


def _partial():
    rng = np.random.default_rng(0)
    return {(0, 3): rng.random((3, 30, 256, 2)), (2, 1): (np.arange(4, dtype=np.float32), None),
            "x": [np.float64(np.nan), 1.5, -7, True, "s", np.int64(3),
                  np.zeros((0, 2), dtype=np.int32), np.ones(3, dtype=bool)]}


def _assert_same(a, b):
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
        assert b.flags.aligned and b.flags.writeable
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, float):
        assert a == b or (np.isnan(a) and np.isnan(b))
    else:
        assert a == b


def test_frames_carry_partials_bit_for_bit_and_refuse_other_types():
    ch0, ch1 = _pair()
    try:
        value = _partial()
        for step in range(3):  # several frames queue up on one connection
            ch0.post(_direct.frame(step, 0, value))
        ch1.wait({(0, 0), (1, 0), (2, 0)}, 0.5, lambda: None)
        for step in range(3):
            kind, got = ch1.inbox.pop((step, 0))
            assert kind == _direct.KIND_DATA
            _assert_same(value, got)
        # Frames that arrive in small pieces (cut across header, description and payload),
        # one of them a feature share sent as per-node pieces without a copy.
        share = {(2, 0): value[(0, 3)][:, 7:19]}
        raw = b"".join(bytes(b) for v, step in ((share, 3), ((1.5, None), 4))
                       for b in _direct.frame(step, 0, v))
        sender = threading.Thread(target=_trickle, args=(ch0.out[1], raw, 1001))
        sender.start()
        ch1.wait({(3, 0), (4, 0)}, 0.5, lambda: None)
        sender.join()
        _assert_same(share, ch1.inbox.pop((3, 0))[1])
        assert ch1.inbox.pop((4, 0))[1] == (1.5, None)
    finally:
        ch0.close()
        ch1.close()
    for bad in (object(), {"a": np.array([object()])}, {1.5j: 1}):
        with pytest.raises(TypeError):
            _direct.frame(0, 0, bad)


def test_descriptions_of_structures_seen_before_are_the_ones_written_in_full():
    """A value's description comes from the cache of structures sent before (by signature);
    values that compare equal but are described apart (0.0 and -0.0, True and 1, 1 and 1.0,
    a tuple and a list, other shapes or dtypes) each get their own, and a decoded value is
    new every time (nothing of a cached plan is shared between frames)."""
    a = np.arange(6.0).reshape(2, 3)
    values = [0.0, -0.0, 1, True, 1.0, "1", None, (1, 2), [1, 2], {1: 2}, {True: 2},
              {(0, 1): a}, {(0, 1): a[:, :2]}, {(0, 1): a.astype(np.float32)},
              {(0, 1): a[:1]}, ("best", a, {0: np.ones(2, dtype=bool)}), ("best", a, {}),
              (np.float64(1.0), 1.0), (np.float64(2.0), 1.0), (np.float32(1.0), 1.0),
              [np.int64(3)], {"x": [a, (a, None)]}]
    for _ in range(2):  # the second time from the cache
        for v in values:
            meta, arrays = _direct.encode(v)
            full, arrays_full = _direct._encode(v)
            assert meta == full and len(arrays) == len(arrays_full)
            for x, y in zip(arrays, arrays_full):
                assert x.dtype == y.dtype and x.shape == y.shape
                np.testing.assert_array_equal(x, y)
            raw = b"".join(bytes(b) for b in _direct.frame(0, 0, v)[1:])
            got = _direct.decode(meta, np.frombuffer(raw, dtype=np.uint8).copy())
            _assert_same(v, got)
    first = _direct.decode(*_payload({"k": [1, a]}))
    first["k"].append(3)
    assert _direct.decode(*_payload({"k": [1, a]}))["k"][0:1] == [1]
    assert len(_direct.decode(*_payload({"k": [1, a]}))["k"]) == 2


def _payload(v):
    bufs = _direct.frame(0, 0, v)
    return _direct.encode(v)[0], np.frombuffer(b"".join(bytes(b) for b in bufs[1:]),
                                               dtype=np.uint8).copy()


def _trickle(sock, raw, size):
    sock.setblocking(True)
    for i in range(0, len(raw), size):
        sock.sendall(raw[i:i + size])
        time.sleep(0.0002)


def _frame_bytes(meta: bytes, payload: bytes, magic=_direct.MAGIC, kind=0, n_payload=None):
    return _direct.FRAME.pack(magic, kind, 0, 1, len(meta),
                              len(payload) if n_payload is None else n_payload) + meta + payload


@pytest.mark.parametrize("raw, message", [
    (_frame_bytes(b"{}", b"", magic=b"HTTP"), "garbled"),
    (_frame_bytes(b"", b"", kind=7), "garbled"),
    (_direct.FRAME.pack(_direct.MAGIC, 0, 0, 1, 10, 1 << 62), "over the limits"),
    (_frame_bytes(b"{not json", b""), "description is garbled"),
    (_frame_bytes(b'{"a":[4],"d":"|O","x":false}', bytes(64)), "invalid array"),
    (_frame_bytes(b'{"a":[4],"d":"<f8","x":false}', bytes(8)), "its payload has 8"),
    (_frame_bytes(b'{"q":1}', b""), "description is garbled"),
    (_frame_bytes(b'{"t":[],"l":[],"m":[]}', b""), "description is garbled"),
    (_frame_bytes(b"[" * 100_000 + b"]" * 100_000, b""), "description"),
], ids=["magic", "kind", "oversize", "json", "dtype", "short-payload", "unknown-key",
        "three-keys", "deep"])
def test_a_garbled_frame_is_a_clear_error_not_a_hang(raw, message):
    """A peer that breaks the protocol (bad magic, sizes over the limits, a description that
    does not parse or does not match its payload) ends the wait with ChannelError."""
    ch0, ch1 = _pair()
    try:
        ch0.out[1].setblocking(True)
        ch0.out[1].sendall(raw)
        with pytest.raises(_direct.ChannelError, match=message):
            ch1.wait({(0, 0)}, 0.5, lambda: None)
    finally:
        ch0.close()
        ch1.close()


def test_strangers_are_refused_and_a_closed_peer_is_seen():
    """Connections without the listener's token (wrong token, garbage, silence, a group
    not expected) are closed; the expected peer still gets through. A peer whose connection
    closes while its frame is awaited raises PeerGone (the run is then lost)."""
    lis = _direct.Listener("tcp://127.0.0.1:1")
    host, port, token, local = lis.card()
    strangers = [socket.create_connection((host, port)) for _ in range(4)]
    if local is not None:  # the Unix socket asks for the token too
        strangers.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        strangers[-1].connect(local)
        strangers[-1].sendall(_direct.HELLO.pack(_direct.MAGIC, bytes(16), 1))
    strangers[0].sendall(_direct.HELLO.pack(_direct.MAGIC, bytes(16), 1))  # wrong token
    strangers[1].sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(8))  # garbage
    strangers[2].sendall(_direct.HELLO.pack(_direct.MAGIC, bytes.fromhex(token), 5))
    # strangers[3] says nothing: closed after the hello timeout
    peer = _direct.connect(lis.card(), 1)
    inc = _direct.accept(lis, {1}, lambda: False, timeout=10, hello_timeout=0.5)
    lis.close()
    assert set(inc) == {1}
    for s in strangers:
        assert _closed(s)
        s.close()
    # Nobody else connects: the wait ends at its timeout, or when told to stop.
    lis2 = _direct.Listener("tcp://127.0.0.1:1")
    assert _direct.accept(lis2, {0}, lambda: False, timeout=0.2) is None
    assert _direct.accept(lis2, {0}, lambda: True) is None
    lis2.close()
    ch = _direct.Channel({}, inc)
    peer.sendall(_direct.FRAME.pack(_direct.MAGIC, 0, 0, 1, 0, 0)[:5])  # half a header
    peer.close()
    with pytest.raises(_direct.PeerGone):
        ch.wait({(0, 1)}, 0.5, lambda: None)
    ch.close()


def _closed(s):
    """Whether the other end closed ``s`` (an orderly close, or a reset when bytes we sent
    were left unread)."""
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


# ------------------------------------------------------------------ on the process cluster
def _group(run, g, addresses, plan):
    """A run's group: exchanges per ``plan`` ("swap": a step with the other group; "leave":
    return; "sleep": hold without exchanging); returns what it saw."""
    from dml import _collective

    seen = []
    try:
        with _collective.long_lived(run, g, addresses, "test") as link:
            seen.append(link.channel is not None)
            for step, what in enumerate(plan):
                if what == "leave":
                    return seen
                if what == "sleep":
                    time.sleep(2)
                    continue
                out = link.exchange(step, {(0, g): np.full(3, float(g))})
                seen.append([float(o[(0, h)][0]) for h, o in enumerate(out)])
    except _collective.RunLost as exc:
        seen.append(f"RunLost: {exc}")
    return seen


def test_runs_on_a_process_cluster_swap_over_the_channel_and_end_when_a_peer_is_gone(
        process_client):
    client = process_client
    addresses = sorted(client.nthreads())[:2]
    assert len(addresses) == 2 and all(a.startswith("tcp://") for a in addresses)
    client.run(_collective.install)

    def submit(run, plans):
        return [client.submit(_group, run, g, addresses, plan, workers=[addresses[g]],
                              allow_other_workers=False, pure=False)
                for g, plan in enumerate(plans)]

    # Two steps swapped over the channel, then group 1 leaves (as a killed worker's task
    # would: its connections close): group 0 waits for step 2 and loses the run.
    run = f"test-direct-{uuid.uuid4().hex}"
    t0 = time.monotonic()
    a, b = client.gather(submit(run, [["swap", "swap", "swap"], ["swap", "swap", "leave"]]))
    assert a[:3] == [True, [0.0, 1.0], [0.0, 1.0]] and b == a[:3]
    assert a[3].startswith("RunLost") and "lost a peer" in a[3]
    client.run(_collective.abandon, run)
    # An abandoned run: group 1 holds; the client abandons the run; group 0 stops waiting.
    run = f"test-direct-{uuid.uuid4().hex}"
    futures = submit(run, [["swap", "swap"], ["swap", "sleep", "swap"]])
    time.sleep(1.0)
    client.run(_collective.abandon, run)
    a, b = client.gather(futures)
    # (However late the tasks started, both end with RunLost, none hangs.)
    assert "abandoned" in a[-1] and b[-1].startswith("RunLost")
    assert time.monotonic() - t0 < 60
    # The handler transport when the channel is off: the same values.
    client.run(lambda: setattr(_collective, "DIRECT", False))
    try:
        run = f"test-direct-{uuid.uuid4().hex}"
        a, b = client.gather(submit(run, [["swap"], ["swap"]]))
        assert a == b == [False, [0.0, 1.0]]
    finally:
        client.run(lambda: setattr(_collective, "DIRECT", True))
        client.run(_collective.abandon, run)


def test_a_channel_wait_is_stopped_by_its_check():
    """The wait calls its check whenever the poll interval passes without a frame: that is
    how an abandoned run or a cancelled task ends it."""
    ch0, ch1 = _pair()
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()

    def check():
        if stop.is_set():
            raise RuntimeError("stopped")

    try:
        with pytest.raises(RuntimeError, match="stopped"):
            ch1.wait({(0, 0)}, 0.05, check)
    finally:
        ch0.close()
        ch1.close()


def test_a_run_of_one_group_exchanges_with_itself_until_abandoned():
    """One group has no one to swap partials with: its own comes straight back (no message,
    no wait), and an abandoned run still ends it with RunLost."""
    run = f"solo-{uuid.uuid4().hex}"
    link = _collective.Link(None, "key", run, 0, ["tcp://127.0.0.1:1"], "a test run")
    partial = np.arange(3.0)
    got = link.exchange(0, partial)
    assert len(got) == 1 and got[0] is partial
    _collective.abandon(run)
    with pytest.raises(_collective.RunLost, match="abandoned"):
        link.exchange(1, partial)
