"""The presenter's server (issue 19, item 5): `--host` must be a loopback address unless `--public` is given (then
one warning line), idle or half-sent connections time out and free their threads, at most MAX_CONNECTIONS handler
threads run at once, a client that goes away mid-response prints no traceback, and Ctrl-C is `interrupted`, 130.

The server tests serve a small fake page (`make_server` does not care what the page is) with the timeout made
small; every wait is on the server closing a socket or a thread ending, under a generous bound, never on a clock.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

import lab.cli as cli
from lab.present import presenter

BOUND_S = 60.0  # "it finishes": far beyond what any of these waits takes on a loaded machine
PAGE = "<!doctype html><p>presenter</p>"


def no_model(*args, **kwargs):
    pytest.fail("ran the model on bad input")


@pytest.fixture
def serve(monkeypatch) -> Iterator:
    """serve(page) → a running presenter server on 127.0.0.1 with a 0.5 s connection timeout; shut down after."""
    monkeypatch.setattr(presenter, "CONNECTION_TIMEOUT_S", 0.5)
    servers = []

    def start(page: str = PAGE):
        servers.append(presenter.serve_in_thread(page))
        return servers[-1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def connect(server, payload: bytes = b"") -> socket.socket:
    sock = socket.create_connection(server.server_address[:2], timeout=BOUND_S)
    if payload:
        sock.sendall(payload)
    return sock


def read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (BOUND_S of silence fails the test)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def still_alive(threads: list[threading.Thread]) -> list[threading.Thread]:
    for t in threads:
        t.join(BOUND_S)
    return [t for t in threads if t.is_alive()]


# ---- --host and --public ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["python -m lab.present", "dspark-lab present"])
def test_present_empty_host_is_refused(entry, capsys, monkeypatch) -> None:
    monkeypatch.setattr(presenter, "build_data", no_model)
    rc = presenter.main(["--host", ""]) if entry.startswith("python") else cli.main(["present", "--host", ""])
    assert rc == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --host") and "loopback" in lines[0], err
    assert out == ""


def test_present_every_interface_is_refused_without_public(capsys, monkeypatch) -> None:
    monkeypatch.setattr(presenter, "build_data", no_model)
    assert presenter.main(["--host", "0.0.0.0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --host = '0.0.0.0'") and "--public" in lines[0]
    for host in ("0.0.0.0", "::", "192.168.1.20", "10.0.0.1"):
        with pytest.raises(ValueError, match="^--host"):
            presenter.check_host(host, public=False)
        assert presenter.check_host(host, public=True) is True  # allowed, and main_present warns


def test_present_loopback_hosts_are_allowed_and_names_are_not_looked_up(monkeypatch) -> None:
    for host in ("127.0.0.1", "127.4.5.6", "::1", "localhost"):
        assert presenter.check_host(host, public=False) is False  # nothing to warn about
        assert presenter.check_host(host, public=True) is False
    for host in ("example.com", "my-laptop", " 127.0.0.1", "127.1"):
        with pytest.raises(ValueError, match=f"^--host = {host!r} is not an IP address"):
            presenter.check_host(host, public=True)
    # "localhost" is loopback only if every address it names is one
    monkeypatch.setattr(presenter.socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("192.168.1.20", 0))])
    with pytest.raises(ValueError, match="^--host = 'localhost' is not a loopback address"):
        presenter.check_host("localhost", public=False)


class FakeServer:
    """A server that is already listening on `host` (nothing is bound) and is then stopped with Ctrl-C."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.server_address = (host, 8765)
        self.closed = False

    def serve_forever(self) -> None:
        raise KeyboardInterrupt

    def server_close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_server(monkeypatch) -> Iterator[list[FakeServer]]:
    """main_present with a fake page and FakeServer: no model run, no socket."""
    made: list[FakeServer] = []

    def make(page: str, host: str, port: int) -> FakeServer:
        made.append(FakeServer(host))
        return made[-1]

    monkeypatch.setattr(presenter, "build_data", lambda *a, **k: {})
    monkeypatch.setattr(presenter, "render_page", lambda data: PAGE)
    monkeypatch.setattr(presenter, "make_server", make)
    return made


@pytest.mark.parametrize("lang", ["vi", "en"])
def test_present_public_prints_one_warning_line_in_its_language(lang, fake_server, capsys) -> None:
    assert presenter.main(["--host", "0.0.0.0", "--public", "--lang", lang]) == 130
    out, err = capsys.readouterr()
    assert err.splitlines() == [presenter.PUBLIC_WARNING[lang].format(host="0.0.0.0", port=8765), "interrupted"]
    assert "--public" in err and "0.0.0.0" in err
    assert out.startswith("Serving the DSpark presenter at http://0.0.0.0:8765/")  # the URL stays stdout's first line
    assert fake_server[0].closed


def test_present_public_on_loopback_prints_no_warning(fake_server, capsys) -> None:
    assert presenter.main(["--public"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


# ---- Ctrl-C ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("entry", ["python -m lab.present", "dspark-lab present"])
def test_present_ctrl_c_is_interrupted_and_130(entry, fake_server, capsys) -> None:
    rc = presenter.main([]) if entry.startswith("python") else cli.main(["present"])
    assert rc == 130
    out, err = capsys.readouterr()
    assert err == "interrupted\n"
    assert "stopped" not in out and out.startswith("Serving the DSpark presenter at http://127.0.0.1:8765/")
    assert fake_server[0].closed  # the socket is closed on the way out


# ---- timeouts, the thread bound, clients that go away ------------------------------------------------------------
@pytest.mark.parametrize(
    "payload", [b"", b"GET / HT", b"GET / HTTP/1.0\r\nHost: x\r\n"], ids=["idle", "half", "no-end"]
)
def test_present_idle_or_half_sent_connection_is_closed(payload, serve) -> None:
    server = serve()
    with connect(server, payload) as sock:
        assert read_to_end(sock) == b""  # closed by the server after its timeout, nothing answered


def test_present_many_idle_sockets_release_their_threads(serve) -> None:
    server = serve()
    before = set(threading.enumerate())
    socks = [connect(server) for _ in range(50)]
    try:
        assert all(read_to_end(s) == b"" for s in socks)
        handlers = [t for t in threading.enumerate() if t not in before]
        assert still_alive(handlers) == []
    finally:
        for s in socks:
            s.close()
    assert set(threading.enumerate()) <= before  # no thread is left from the 50 connections


def test_present_connections_beyond_the_bound_wait_for_a_free_thread(serve, monkeypatch) -> None:
    monkeypatch.setattr(presenter, "MAX_CONNECTIONS", 2)
    server = serve()
    monkeypatch.setattr(server.RequestHandlerClass, "timeout", BOUND_S)  # the two idle ones hold their threads
    idle = [connect(server) for _ in range(2)]
    try:
        with connect(server, b"GET / HTTP/1.0\r\n\r\n") as waiting:
            waiting.settimeout(1.0)
            with pytest.raises(TimeoutError):
                waiting.recv(1)  # the third is not served while two threads are busy
            for s in idle:
                s.close()  # their handlers end (the client closed): the third gets a thread
            waiting.settimeout(BOUND_S)
            reply = read_to_end(waiting)
    finally:
        for s in idle:
            s.close()
    assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(PAGE.encode())


@pytest.mark.parametrize("how", ["reset", "stops-reading"])
def test_present_client_gone_mid_response_prints_no_traceback(how, serve, capsys) -> None:
    big = "x" * (32 << 20)  # far beyond what the socket buffers hold: the server is still writing when it goes
    server = serve(big)
    before = set(threading.enumerate())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(BOUND_S)
    sock.connect(server.server_address[:2])
    sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
    assert sock.recv(16).startswith(b"HTTP/1.0 200")  # the handler thread runs and is writing the page
    handlers = [t for t in threading.enumerate() if t not in before]
    if how == "reset":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a RST
        sock.close()
        assert still_alive(handlers) == []
    else:
        assert still_alive(handlers) == []  # it stopped reading: the write times out and the thread ends
        sock.close()
    out, err = capsys.readouterr()
    assert err == "" and out == "", err  # no traceback, no line at all


@pytest.mark.parametrize("gone", [BrokenPipeError, ConnectionResetError, TimeoutError])
def test_present_server_is_quiet_only_about_clients_that_went_away(gone, serve, capsys) -> None:
    """handle_error, where socketserver sends what a handler raised (a reset while reading the request, too)."""
    server = serve()
    for error, printed in ((gone("the client went away"), False), (RuntimeError("a bug in the server"), True)):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))
        err = capsys.readouterr().err
        assert ("Traceback" in err and "a bug in the server" in err) if printed else err == "", err


def test_present_serves_on_ipv6_loopback(serve) -> None:
    try:
        server = presenter.make_server(PAGE, "::1", 0)
    except OSError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    try:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        assert presenter.url_of(server).startswith("http://[::1]:")
        with socket.create_connection(server.server_address[:2], timeout=BOUND_S) as sock:
            sock.sendall(b"GET /nothing HTTP/1.0\r\n\r\n")
            assert read_to_end(sock).startswith(b"HTTP/1.0 404")
    finally:
        server.shutdown()
        server.server_close()
