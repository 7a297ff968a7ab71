"""Headless Chromium for tests: render a page, screenshot it, dump its DOM, and record every request it made.

The page is served from a small HTTP server on 127.0.0.1, and Chromium is pointed at a recording proxy on
127.0.0.1 with the implicit loopback bypass removed (`<-loopback>`), so every request the browser makes, the
page's own included, goes through the proxy. The proxy passes the page's URL to the page server and answers
404 to anything else; a self-contained page leaves exactly one request in its log.
"""

from __future__ import annotations

import dataclasses
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from typing import List, Optional, Sequence, Tuple

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
INSTALL = "install it with: apt-get update && apt-get install -y chromium (Debian's package, /usr/bin/chromium)"
# Chromium's own traffic (updates, sync, metrics, safe browsing, field trials) off: the proxy's log must
# hold only what the page asked for.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--metrics-recording-only",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--no-pings",
    "--disable-client-side-phishing-detection",
    "--disable-component-extensions-with-background-pages",
    "--no-service-autorun",
    "--disable-breakpad",
    "--password-store=basic",
    # One list: Chromium reads only the last --disable-features.
    # AimEnabled and AimServerEligibilityEnabled: the omnibox's AI mode asks www.google.com whether it may show
    # (Chromium 150); PreconnectToSearch: a connection opened to the default search engine at start.
    "--disable-features=OptimizationHints,OptimizationGuideModelDownloading,MediaRouter,DialMediaRouteProvider,"
    "Translate,InterestFeedContentSuggestions,AutofillServerCommunication,CertificateTransparencyComponentUpdater,"
    "NetworkTimeServiceQuerying,HttpsUpgrades,AimEnabled,AimServerEligibilityEnabled,PreconnectToSearch",
    "--hide-scrollbars",
)
PAGE_PATH = "/page.html"
# What Chromium 156 asks for by itself whatever the flags (an on-demand component check, the network time
# and the sign-in origin), as (method, URL without query): recorded, and told apart from the page's own
# requests. A page's request to any other host, or any other path of these, still counts against it.
BROWSER_OWN = frozenset(
    {
        ("CONNECT", "update.googleapis.com:443"),
        ("POST", "http://update.googleapis.com/service/update2/json"),
        ("GET", "http://clients2.google.com/time/1/current"),
        ("POST", "http://clients2.google.com/time/1/current"),
        ("CONNECT", "accounts.google.com:443"),
    }
)


class BrowserMissing(RuntimeError):
    """No Chromium on this machine; the message says how to install it."""


def chromium() -> str:
    """The Chromium binary; raises BrowserMissing naming how to install it."""
    for candidate in CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise BrowserMissing(
        f"headless Chromium is needed for this test and was not found ({', '.join(CANDIDATES)}); {INSTALL}"
    )


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format, *args):  # BaseHTTPRequestHandler's signature
        pass


class _Server:
    """A ThreadingHTTPServer on a free port of 127.0.0.1, in a daemon thread, with a log of requests."""

    def __init__(self, handler_class):
        self.requests: List[Tuple[str, str]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(handler_class):
            server_owner = owner

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def record(self, method: str, target: str) -> None:
        with self.lock:
            self.requests.append((method, target))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class PageServer(_Server):
    """Serves one HTML document at PAGE_PATH; 404 for anything else."""

    def __init__(self, document: bytes):
        self.document = document

        class Handler(_Quiet):
            def do_GET(self):  # http.server's naming
                owner = self.server_owner
                owner.record("GET", self.path)
                if self.path != PAGE_PATH:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(owner.document)))
                self.end_headers()
                self.wfile.write(owner.document)

        super().__init__(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{PAGE_PATH}"


class RecordingProxy(_Server):
    """An HTTP proxy that records every request (CONNECT tunnels included) and answers 404, except for the
    one URL it passes to the page server."""

    def __init__(self, page_url: str):
        self.page_url = page_url

        class Handler(_Quiet):
            def _answer(self):
                owner = self.server_owner
                owner.record(self.command, self.path)
                if self.command == "GET" and self.path == owner.page_url:
                    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to the server
                    with opener.open(self.path, timeout=30) as response:
                        body = response.read()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()

            do_GET = do_POST = do_HEAD = do_PUT = do_OPTIONS = do_CONNECT = _answer

        super().__init__(Handler)


@dataclasses.dataclass
class Rendered:
    screenshot: str  # PNG path
    dom: str  # the DOM after load, as Chromium serialised it
    page_url: str
    proxied: List[Tuple[str, str]]  # every request the proxy saw: (method, target)
    served: List[Tuple[str, str]]  # every request the page server saw
    file_dom: Optional[str] = None  # the DOM loaded from file:// with every host name unresolvable

    @property
    def browser_own(self) -> List[Tuple[str, str]]:
        """The requests Chromium made by itself (BROWSER_OWN)."""
        return [r for r in self.proxied if (r[0], r[1].split("?")[0]) in BROWSER_OWN]

    @property
    def foreign_requests(self) -> List[Tuple[str, str]]:
        """Requests other than the page itself and Chromium's own: what the page asked for."""
        own = set(self.browser_own)
        return [r for r in self.proxied if r != ("GET", self.page_url) and r not in own]

    @property
    def page_requests(self) -> List[Tuple[str, str]]:
        return [r for r in self.proxied if r == ("GET", self.page_url)]


def _run(binary: str, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited with {done.returncode}: {done.stderr[-2000:]}")
    return done


def render(html_path: str, out_dir: str, width: int = 1280, height: int = 4000, timeout: float = 120.0) -> Rendered:
    """Loads `html_path` in headless Chromium through the recording proxy: a screenshot of `width` x `height`
    into `out_dir`/page.png, the DOM, and the requests; then once more from file:// with every host name
    mapped to nowhere, for the DOM."""
    binary = chromium()
    with open(html_path, "rb") as f:
        document = f.read()
    os.makedirs(out_dir, exist_ok=True)
    screenshot = os.path.join(out_dir, "page.png")
    with PageServer(document) as server, RecordingProxy(server.url) as proxy, tempfile.TemporaryDirectory() as home:
        network = [f"--proxy-server=http://127.0.0.1:{proxy.port}", "--proxy-bypass-list=<-loopback>"]
        _run(
            binary,
            [
                *FLAGS,
                f"--user-data-dir={os.path.join(home, 'shot')}",
                *network,
                f"--screenshot={screenshot}",
                f"--window-size={width},{height}",
                server.url,
            ],
            timeout,
        )
        dom = _run(
            binary,
            [*FLAGS, f"--user-data-dir={os.path.join(home, 'dom')}", *network, "--dump-dom", server.url],
            timeout,
        ).stdout
        file_dom = _run(
            binary,
            [
                *FLAGS,
                f"--user-data-dir={os.path.join(home, 'file')}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--dump-dom",
                "file://" + os.path.abspath(html_path),
            ],
            timeout,
        ).stdout
        return Rendered(screenshot, dom, server.url, list(proxy.requests), list(server.requests), file_dom)


def png_size(path: str) -> Tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; raises ValueError for anything that is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def pixel_variance(path: str) -> float:
    """The variance of the screenshot's grey levels: 0 for a blank (one-colour) image."""
    from PIL import Image, ImageStat

    with Image.open(path) as image:
        return float(ImageStat.Stat(image.convert("L")).var[0])
