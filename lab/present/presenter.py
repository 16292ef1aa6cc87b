"""Presenter mode: `dspark-lab present` walks 1A → 6B on a projector as a deck, then 6B round by round.

One page, served by Python's own http.server on 127.0.0.1 (offline: no CDN, no Jupyter kernel, nothing to install
beyond the lab). Each step of the lesson is cut into builds (lab/present/deck.py: text → equation → figures →
tables → checks), one screen each at 1280×720 and 1920×1080 with text ≥ 20 px, that Next / PageDown walk and that
always open at their top; a slide carries a short form and its speaker notes (the long form), which `?notes` shows
in a second window kept on the same slide. The idea slide sits beside the 4-column map with the active block lit.
The text-size control scales the content (text, tables, plot fonts, the map), not the buttons. After 6B the same
Next plays the rounds of a scheduled speculative run (lab/present/rounds.py) phase by phase — draft, schedule (ℓ
of the `dspark` scheduler at R requests in flight), (predict), verify, commit — one narrated sentence per phase,
each lighting the rows, cells and cache slots it speaks about, with the window ring, the compressor carry, the
Engram history and the draft ring in the left column. Each language's deck follows a prompt in that language.
Monospace text uses the embedded "DSpark Mono" face (lab/present/fonts.py): Vietnamese renders on every machine.
Everything is computed once at start (≈ 10 s) and embedded in the page as JSON; the page only draws.

Why not Voilà or JupyterLab's single-document mode: both need a running kernel and a notebook server for what is
here precomputed data, Voilà is one more dependency, and neither makes the projector view simpler than one page.
"""

from __future__ import annotations

import argparse
import errno
import io
import ipaddress
import socket
import sys
import threading
import time
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..lesson.steps import STEP_IDS
from ..options import Help, Parser, add_seed, add_temperature, command, help_lang, translate, wrap
from ..text import LANGS, UI, Texts, check_lang, lang_string, lang_table, say_symlink
from .page import CACHE_TEXT, DEFAULT_REQUESTS, MARKERS, asset, page_vocab, render

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_ROUNDS = 12
ROUNDS_SLIDE = "6B-rounds"  # the slide after 6B: the rounds of the scheduled run
PLOTLY = "plotly.min.js"  # served beside the page from the installed plotly package (no network)
CONNECTION_TIMEOUT_S = 5.0  # a connection that sends nothing (or takes no WRITE_CHUNK) this long is closed
HEAD_DEADLINE_S = 10.0  # the request line and headers must have arrived this long after the connection was accepted
MAX_CONNECTIONS = 64  # handler threads at once; the next connection waits in the listen queue until one ends
WRITE_CHUNK = 64 * 1024  # bytes per send: the timeout bounds a stalled client, not a slow client's whole download
GONE = (ConnectionError, TimeoutError)  # a client that closed, reset or stalled (BrokenPipe, ConnectionReset...)
HOSTS_ALLOWED = (
    "allowed a loopback address (127.0.0.1 or any 127.x.y.z, ::1, localhost) or, with --public, an IP address "
    "of this machine (0.0.0.0: every interface); host names other than localhost are not looked up"
)
PORT_TEXT = lang_table("messages", "ports")  # a --port / --host that cannot be listened on, by errno
PORT_ERRORS = {errno.EADDRINUSE: "taken", errno.EACCES: "privileged", errno.EADDRNOTAVAIL: "not_here"}
PUBLIC_WARNING = lang_string("presenter", "public_warning")

# lab/lesson/steps.py UI strings the page reuses as they are; the page's own strings follow
SHARED = (
    "step", "language", "prompt", "seed", "temperature", "position", "draft_token", "draft_probability",
    "confidence", "target_token", "accepted", "rejected", "not_verified", "not_sent", "resampled", "bonus",
    "verify_len", "requests_in_flight", "layer", "ratio", "next_step", "prev_step",
)  # fmt: skip
TEXT: dict[str, dict[str, str]] = lang_table("presenter", "text") | CACHE_TEXT


def strings() -> dict[str, dict[str, str]]:
    """Every string the page shows, {key: {vi, en}}: lab/lesson/steps.py's shared terms and this module's own."""
    clash = set(UI) & set(TEXT)
    if clash:
        raise ValueError(f"presenter strings {sorted(clash)} are also lab/lesson/steps.py UI keys: reuse them instead")
    from .deck import strings as deck_strings

    own = TEXT | deck_strings()
    if len(own) != len(TEXT) + len(deck_strings()):
        raise ValueError(f"presenter and deck strings share keys: {sorted(set(TEXT) & set(deck_strings()))}")
    return {k: {lang: UI[k][lang] for lang in LANGS} for k in SHARED} | own


# ---- the data ------------------------------------------------------------------------------------------------
def build_data(
    prompt: str | None = None,
    requests: int = DEFAULT_REQUESTS,
    temperature: float = 0.0,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    lang: str = "en",
) -> dict[str, Any]:
    """Everything the page shows: the map, every step's slides and figures and the scheduled rounds, in both
    languages (each on its language's prompt, DECK_PROMPT, unless `prompt` is given), the strings.

    One ℓ for 6B: the walk's round (the narrated draft table) verifies the ℓ the `dspark` scheduler picks for it at
    R = `requests`, the load the rounds run at (one draft where it sends none); at T = 0 it is the rounds' round 1."""
    import torch

    from ..lesson.view_6b import load_plan
    from ..screens.widgets import LabState
    from . import deck
    from .rounds import scheduled_rounds

    lang = check_lang(lang)
    torch.set_num_threads(1)  # the lab model is tiny: one thread is faster and immune to oversubscription
    prompts, decks, debug = {}, {}, {}
    for code in LANGS:
        prompts[code], ids = prompt_tokens(DECK_PROMPT[code] if prompt is None else prompt, rounds, lang)
        state = LabState(prompt=prompts[code], seed=seed, lang=code, temperature=temperature)
        ell = load_plan(state.walk.round.confidence, requests).verify_len  # 0 at a load that sends nothing
        state.update(verify_len=max(1, ell))  # the walk verifies at least one draft (its narration says so)
        decks[code] = deck.deck(state, requests)
        debug[code] = scheduled_rounds(state.walk.model, ids, rounds, requests, temperature, seed)
    shape = {
        code: [(s["step"], s["kind"], len(s.get("narration", ()))) for s in d["slides"]] for code, d in decks.items()
    }
    if len({tuple(v) for v in shape.values()}) != 1:
        raise ValueError(f"the languages' decks differ in their slides: {shape}")
    from dspark_mini.tokenizer import default_tokenizer

    return {
        "lang": lang,
        "prompt": prompts,
        "steps": list(STEP_IDS),
        "slides": [*STEP_IDS, ROUNDS_SLIDE],
        "map": {code: deck.map_data(code) for code in LANGS},
        "deck": decks,
        "debugger": debug,
        "vocab": page_vocab(default_tokenizer()),
        "markers": MARKERS,
        "ui": strings(),
    }


ROUNDS_FIT = Texts(lang_table("presenter", "rounds_fit"), "presenter error")
DECK_PROMPT = lang_string("presenter", "deck_prompt")  # each language's deck on a prompt in that language


def prompt_tokens(prompt: str | None, rounds: int, lang: str) -> tuple[str, list[int]]:
    """The deck's prompt (default: the walk's) through lab.text.check_prompt, NFC → (text, ids); then the rounds
    the 6B page decodes after it must fit in max_seq_len too (the anchor of the next round included)."""
    from dspark_mini import get_config, get_tokenizer  # torch: only when the deck is built, not for --help

    from ..text import DEFAULT_PROMPT, check_prompt

    cfg = get_config("lab")
    prompt = DEFAULT_PROMPT if prompt is None else prompt
    text, ids = check_prompt(prompt, get_tokenizer(cfg).encode, cfg, "--prompt", lang)
    verify = cfg.dspark_block_size + 1
    if len(ids) + rounds * verify + 1 > cfg.max_seq_len:
        need = rounds * verify + 1
        fmt = {"n": len(ids), "rounds": rounds, "need": need, "verify": verify, "seq": cfg.max_seq_len}
        raise ValueError(ROUNDS_FIT("rounds_fit", lang, room=cfg.max_seq_len - need, **fmt))
    return text, ids


def render_page(data: dict[str, Any]) -> str:
    """The page: the template with the style (the embedded monospace face first), the data (JSON) and the app
    inlined; plotly.js loads from beside it."""
    from .fonts import font_face_css

    style = font_face_css() + asset("presenter.css") + asset("caches.css") + asset("verdict.css")
    parts = {"/*@STYLE@*/": style, "/*@APP@*/": asset("caches_view.js") + asset("presenter_app.js")}
    return render("presenter_template.html", data, parts)


@lru_cache(maxsize=1)
def plotly_js() -> bytes:
    """plotly.js from the installed plotly package (the same bundle JupyterLab's renderer uses offline)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode("utf-8")


# ---- the server ------------------------------------------------------------------------------------------------
class PresenterServer(ThreadingHTTPServer):
    """http.server's threading server with at most `max_connections` handler threads (beyond that the accept loop
    waits for one to end, and the kernel's listen queue holds the new connections), the address family of its
    host (IPv6 for ::1), and nothing printed for a client that went away (a browser that navigates off the page
    while plotly.js loads): only a real server bug still prints its traceback."""

    request_queue_size = 128  # the listen queue: socketserver's 5 makes a classroom's browsers wait on SYN retries
    page = b""  # the page `/` serves

    def __init__(
        self, host: str, port: int, handler: type[BaseHTTPRequestHandler], max_connections: int | None = None
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS if max_connections is None else max_connections)
        super().__init__((host, port), handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.slots.acquire()  # released by the handler thread when it ends
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started: its slot is free again
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], GONE):
            super().handle_error(request, client_address)


class HeadReader(io.RawIOBase):
    """A connection's socket read under one deadline for the whole request head. A socket timeout alone restarts
    on every byte: a client that sends its headers a byte at a time would hold its thread for ever (and a few dozen
    such clients every thread). Each read here waits at most what is left until `deadline` (time.monotonic), then
    raises TimeoutError, which http.server answers by closing the connection."""

    def __init__(self, sock: socket.socket, deadline: float, idle: float) -> None:
        self.sock, self.deadline, self.idle = sock, deadline, idle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request head did not arrive before its deadline")
        self.sock.settimeout(min(left, self.idle))
        try:
            return self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.idle)  # the response's writes keep the idle timeout


def make_server(
    page: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    head_deadline: float | None = None,
    idle_timeout: float | None = None,
    max_connections: int | None = None,
) -> ThreadingHTTPServer:
    """An HTTP server for the page (`/`) and plotly.js (`/plotly.min.js`); port 0 picks a free port. A connection
    idle for `idle_timeout` (CONNECTION_TIMEOUT_S: nothing sent, a client that stopped reading) is closed, and so is
    one whose request line and headers have not all arrived `head_deadline` (HEAD_DEADLINE_S) after it was
    accepted, however slowly they trickle in; at most `max_connections` (MAX_CONNECTIONS) are handled at once."""
    idle = CONNECTION_TIMEOUT_S if idle_timeout is None else idle_timeout
    deadline_s = HEAD_DEADLINE_S if head_deadline is None else head_deadline

    class Handler(BaseHTTPRequestHandler):
        timeout = idle  # socketserver sets it on every connection's socket

        def setup(self) -> None:
            super().setup()
            self.rfile = io.BufferedReader(HeadReader(self.connection, time.monotonic() + deadline_s, self.timeout))

        def do_GET(self) -> None:  # http.server's name for the GET handler
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path in ("/", "/index.html"):
                self.reply(self.server.page, "text/html; charset=utf-8")
            elif path == f"/{PLOTLY}":
                self.reply(plotly_js(), "text/javascript; charset=utf-8")
            elif path == "/favicon.ico":
                self.reply(b"", "image/x-icon", status=204)
            else:
                self.reply(b"not found", "text/plain; charset=utf-8", status=404)

        def reply(self, data: bytes, kind: str, status: int = 200) -> None:
            """The response; a client that goes away meanwhile ends it quietly (log_message prints nothing)."""
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if status != 204:
                    view = memoryview(data)
                    for start in range(0, len(data), WRITE_CHUNK):
                        self.wfile.write(view[start : start + WRITE_CHUNK])
            except GONE as e:
                self.close_connection = True
                self.log_error("client went away during %s: %r", self.path, e)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the terminal shows the URL, not every request

    server = PresenterServer(host, port, Handler, max_connections)
    server.page = page.encode("utf-8")  # what `/` serves (main_present binds first and sets it once it is built)
    return server


def listen_error(e: OSError, host: str, port: int, lang: str) -> str:
    """The one line for a --port / --host the server cannot listen on, naming the option, in `lang`."""
    text = PORT_TEXT[PORT_ERRORS.get(e.errno, "other")][check_lang(lang)]
    return text.format(host=host, port=port, why=e.strerror or type(e).__name__)


def url_of(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve_in_thread(page: str, host: str = DEFAULT_HOST, port: int = 0) -> ThreadingHTTPServer:
    """Start serving in a daemon thread (tests, `make pictures`); stop with `server.shutdown()`."""
    server = make_server(page, host, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def write_site(page: str, out: Path) -> list[Path]:
    """The page as files in the folder `out` (index.html + plotly.min.js): open index.html from file://.

    Both files are built in a folder beside `out` and swapped in together (dspark_mini.files.folder_swap): out of
    disk or interrupted, the previous site stays whole. It replaces only a new or empty folder or a site the lab
    wrote (its .dspark-lab-files.json lists every file in it); any other folder is refused, nothing in it touched."""
    from dspark_mini.files import folder_swap, write_atomic

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out = {str(out)!r} is a file: allowed a folder (present writes index.html into it)")
    with folder_swap(out, "site", overwrite=True) as work:
        write_atomic(work / "index.html", page)
        write_atomic(work / PLOTLY, plotly_js())
    return [out / "index.html", out / PLOTLY]


# ---- the command ---------------------------------------------------------------------------------------------
def add_present_arguments(p: argparse.ArgumentParser) -> None:
    h = Help("present", getattr(p, "lang", "en"))
    p.add_argument("--prompt", default=None, help=h("prompt"))
    p.add_argument("--lang", default="en", help=h("lang"))
    add_seed(p, h("seed"))
    add_temperature(p)
    p.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help=h("requests"))
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=h("rounds"))
    p.add_argument("--host", default=DEFAULT_HOST, help=h("host", host=DEFAULT_HOST))
    p.add_argument("--public", action="store_true", help=h("public"))
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=h("port", port=DEFAULT_PORT))
    p.add_argument("--out", type=Path, default=None, help=h("out"))


def add_present_parser(sub: Any, lang: str = "en") -> None:
    """`dspark-lab present` among the CLI's subcommands."""
    add_present_arguments(command(sub, Help("present", lang)))


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address; "localhost" is looked up (every address it names must be one), no
    other name is: ValueError for a name or an empty string, whose server would listen on every interface."""
    if host == "localhost":
        try:
            found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as e:
            raise ValueError(f"--host = 'localhost' does not resolve ({e}): {HOSTS_ALLOWED}") from None
        return all(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]).is_loopback for info in found)
    if not host:
        raise ValueError(f"--host is empty (it would listen on every interface): {HOSTS_ALLOWED}")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise ValueError(f"--host = {host!r} is not an IP address: {HOSTS_ALLOWED}") from None


def check_host(host: str, public: bool) -> bool:
    """--host against --public; returns whether other machines can reach the page (then main_present warns)."""
    if is_loopback(host):
        return False
    if not public:
        raise ValueError(f"--host = {host!r} is not a loopback address: {HOSTS_ALLOWED}")
    return True


def public_warning(server: ThreadingHTTPServer, lang: str) -> str:
    """The one line --public prints (in --lang): which address and port other machines can open."""
    host, port = server.server_address[:2]
    return PUBLIC_WARNING[lang].format(host=host, port=port)


def check_present_args(args: argparse.Namespace) -> None:
    """The options' ranges, before the model runs."""
    from dspark_mini.validate import check_int, check_seed, check_temperature

    from ..lesson.view_6b import MAX_LOAD
    from .rounds import MAX_ROUNDS

    if args.lang not in LANGS:  # named as the option (check_lang names a language)
        raise ValueError(f"--lang = {args.lang!r} is invalid: allowed {', '.join(map(repr, LANGS))}")
    check_seed(args.seed, "--seed")
    check_temperature(args.temperature, "--temperature")
    check_int(args.requests, "--requests", 1, MAX_LOAD, "the loads the 6B screens simulate")
    check_int(args.rounds, "--rounds", 1, MAX_ROUNDS)
    check_int(args.port, "--port", 0, 65535)
    check_host(args.host, args.public)
    prompt_tokens(args.prompt, args.rounds, args.lang)
    if args.out is not None and args.out.is_file():
        raise ValueError(f"--out = {str(args.out)!r} is a file: allowed a folder (present writes index.html into it)")
    if args.out is not None:
        from dspark_mini.files import check_folder

        check_folder(args.out, "site", overwrite=True, lang=args.lang)  # one the lab may replace (not a device, a FIFO)


def say(line: str) -> None:
    print(line, flush=True)  # flushed: the URL must reach a pipe before the server blocks


def main_present(args: argparse.Namespace, out: Any = say) -> int:
    """Build the page, then write it (--out) or serve it until Ctrl-C, saying where. The port is bound before the
    page is built (≈ 10 s): one taken is a line naming --port at once. Ctrl-C (KeyboardInterrupt) goes on to the
    caller's boundary (`interrupted`, exit 130), the socket closed."""
    check_present_args(args)
    server = None
    if args.out is None:
        try:
            server = make_server("", args.host, args.port)  # the page comes below; browsers wait in the listen queue
        except OSError as e:
            raise ValueError(listen_error(e, args.host, args.port, args.lang)) from None
    try:
        data = build_data(args.prompt, args.requests, args.temperature, args.seed, args.rounds, args.lang)
        page = render_page(data)
        if server is None:
            say_symlink(args.out, "--out", args.lang)
            files = write_site(page, args.out)
            out(f"wrote {files[0]} and {files[1].name}; open {files[0]} in a browser (no server needed)")
            return 0
        server.page = page.encode("utf-8")
        if check_host(args.host, args.public):
            print(public_warning(server, args.lang), file=sys.stderr, flush=True)
        out(f"Serving the DSpark presenter at {url_of(server)} — open it in a browser (F: full screen; Ctrl-C stops)")
        server.serve_forever()
    finally:
        if server is not None:
            server.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.present`: the same as `dspark-lab present`; bad input → one line naming the option, exit 2;
    Ctrl-C → `interrupted`, exit 130 (as lab/cli.py's boundary)."""
    lang = help_lang(argv)  # the help and the refusals in --lang (an unknown one: English, then refused)
    p = Parser(prog="python -m lab.present", description=wrap(Help("present", lang)("description")), lang=lang)
    add_present_arguments(p)
    args = p.parse_args(argv)
    words = Help("refusal", lang)
    try:
        return main_present(args)
    except KeyboardInterrupt:
        print(words("interrupted"), file=sys.stderr)
        return 130
    except (OSError, ValueError, TypeError) as e:
        print(f"{words('error')} {translate(str(e), lang)}", file=sys.stderr)
        return 2
