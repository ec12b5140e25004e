"""Downloads against a loopback HTTP server: resume, checksum, cache. No network is used."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading

import pytest

from bert4rec_tf.data.download import download
from bert4rec_tf.data.errors import DataError

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


class RangeHandler(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        RangeHandler.requests.append(self.headers.get("Range", ""))
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].split("=")[1].rstrip("-"))
            self.send_response(206)
        else:
            self.send_response(200)
        body = PAYLOAD[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    RangeHandler.requests = []
    httpd = http.server.HTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/file.bin"
    httpd.shutdown()


def test_download_verifies_caches_and_resumes(server, tmp_path):
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    partial = tmp_path / "file.bin.part"
    partial.write_bytes(PAYLOAD[:300_000])            # an interrupted earlier run
    path = download(server, str(tmp_path), "file.bin", sha256=digest)
    assert open(path, "rb").read() == PAYLOAD
    assert RangeHandler.requests == ["bytes=300000-"]
    assert not partial.exists()
    assert open(path + ".sha256").read().strip() == digest
    recorded = os.stat(path + ".sha256")
    assert download(server, str(tmp_path), "file.bin", sha256=digest) == path
    assert len(RangeHandler.requests) == 1              # cached: no second request
    assert os.stat(path + ".sha256").st_ino == recorded.st_ino  # nor a rewritten record


def test_checksum_mismatch_removes_the_file_and_says_so(server, tmp_path):
    with pytest.raises(DataError, match="checksum mismatch .* expected sha256 0000"):
        download(server, str(tmp_path), "file.bin", sha256="0" * 64)
    assert not os.listdir(tmp_path)


def test_without_pinned_digest_the_first_download_is_recorded_and_enforced(server, tmp_path):
    path = download(server, str(tmp_path), "file.bin")
    assert open(path + ".sha256").read().strip() == hashlib.sha256(PAYLOAD).hexdigest()
    with open(path, "r+b") as handle:                   # the cached file changes after its download
        handle.write(b"corrupt")
    with pytest.raises(DataError, match="checksum mismatch .* the file was removed"):
        download(server, str(tmp_path), "file.bin")
    assert not os.path.exists(path)
    assert open(download(server, str(tmp_path), "file.bin"), "rb").read() == PAYLOAD  # fetched anew
    assert len(RangeHandler.requests) == 2


def test_a_cached_file_is_checked_against_the_pinned_digest(server, tmp_path):
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    path = download(server, str(tmp_path), "file.bin", sha256=digest)
    with open(path, "r+b") as handle:
        handle.write(b"corrupt")
    with pytest.raises(DataError, match="checksum mismatch"):   # its record says it was verified
        download(server, str(tmp_path), "file.bin", sha256=digest)
    os.remove(path + ".sha256")
    (tmp_path / "file.bin").write_bytes(b"copied in by hand")    # no record: the pinned digest decides
    with pytest.raises(DataError, match="checksum mismatch"):
        download(server, str(tmp_path), "file.bin", sha256=digest)
    assert len(RangeHandler.requests) == 1


def test_network_error_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="download failed"):
        download("http://127.0.0.1:9/none", str(tmp_path), "x.bin", timeout=2)
