"""A minimal Docker Registry (HTTP API v2, read-only) on 127.0.0.1, for testing real pulls where no
registry is reachable: it serves one image made from a tiny tar through the real Docker engine
(`docker import`, `docker save`), with gzip layers and a schema-2 manifest. Docker talks plain HTTP
to registries on 127.0.0.0/8."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def tiny_rootfs() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, size in (("hello.txt", 64), ("data.bin", 300_000)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = size, 0
            tar.addfile(info, io.BytesIO(b"x" * size))
    return buf.getvalue()


def blobs_of_saved(saved: bytes) -> tuple[bytes, dict[str, bytes]]:
    """From `docker save` output: a schema-2 manifest and its blobs (config, gzip layers) by digest."""
    tar = tarfile.open(fileobj=io.BytesIO(saved))
    index = json.load(tar.extractfile("manifest.json"))[0]
    config = tar.extractfile(index["Config"]).read()
    blobs = {"sha256:" + hashlib.sha256(config).hexdigest(): config}
    layers = []
    for layer_path in index["Layers"]:
        data = gzip.compress(tar.extractfile(layer_path).read(), compresslevel=1, mtime=0)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        layers.append(
            {"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": len(data), "digest": digest}
        )
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": len(config),
                "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
            },
            "layers": layers,
        }
    ).encode()
    return manifest, blobs


class Registry:
    def __init__(self, name: str, tag: str, manifest: bytes, blobs: dict[str, bytes]):
        self.name, self.tag, self.manifest, self.blobs = name, tag, manifest, blobs
        self.requests: list[str] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _reply(self, code: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head: bool):
                registry.requests.append(f"{self.command} {self.path}")
                if self.path in ("/v2/", "/v2"):
                    return self._reply(200, b"{}", {"Content-Type": "application/json"}, head)
                match = re.match(r"^/v2/(.+)/(manifests|blobs)/(.+)$", self.path)
                if not match or match.group(1) != registry.name:
                    return self._reply(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}', {}, head)
                kind, ref = match.group(2), match.group(3)
                digest = "sha256:" + hashlib.sha256(registry.manifest).hexdigest()
                if kind == "manifests" and ref in (registry.tag, digest):
                    return self._reply(
                        200,
                        registry.manifest,
                        {
                            "Content-Type": "application/vnd.docker.distribution.manifest.v2+json",
                            "Docker-Content-Digest": digest,
                        },
                        head,
                    )
                if kind == "blobs" and ref in registry.blobs:
                    return self._reply(
                        200,
                        registry.blobs[ref],
                        {"Content-Type": "application/octet-stream", "Docker-Content-Digest": ref},
                        head,
                    )
                return self._reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', {}, head)

            def do_GET(self):
                self._route(False)

            def do_HEAD(self):
                self._route(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def reference(self) -> str:
        return f"127.0.0.1:{self.port}/{self.name}:{self.tag}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
