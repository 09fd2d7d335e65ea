"""A local stand-in for the Hugging Face Hub, for tests: it answers the endpoints the real
`huggingface_hub` client uses to download a repo (repo info, the recursive file tree, and
HEAD/GET `resolve` with byte ranges) over 127.0.0.1, with the Hub's headers (X-Repo-Commit, ETag,
X-Linked-Etag / X-Linked-Size for LFS files) and error codes (X-Error-Code: GatedRepo,
RepoNotFound, RevisionNotFound). Tests point HF_ENDPOINT at it.

It counts what clients ask for (`requests`), can require a token for a repo (gated), can cut one
download short to test resuming, and can move a branch to a new commit.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


@dataclass
class Repo:
    branches: dict[str, str] = field(default_factory=dict)  # branch or tag -> commit
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit -> path -> content
    gated_token: str | None = None  # when set, only this token may read the repo


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self.cut_once: dict[str, int] = {}  # file path -> bytes to send before dropping the connection
        self._lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Hub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, repo_id: str, files: dict[str, bytes], branch: str = "main", gated_token: str | None = None) -> str:
        """Add (or update) a repo with `files` as a new commit on `branch`; returns the commit."""
        repo = self.repos.setdefault(repo_id, Repo(gated_token=gated_token))
        commit = hashlib.sha1(
            repr(
                (repo_id, sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items()), len(repo.commits))
            ).encode()
        ).hexdigest()
        repo.commits[commit] = dict(files)
        repo.branches[branch] = commit
        return commit

    def file_gets(self, name: str | None = None) -> list[tuple[str, str | None]]:
        """GET requests for file contents (path, Range), optionally of one file name."""
        return [
            (p, r)
            for m, p, r in self.requests
            if m == "GET" and "/resolve/" in p and (name is None or p.endswith("/" + name))
        ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: Hub

    def log_message(self, *args) -> None:
        pass

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _repo(self, repo_id: str, revision: str) -> tuple[Repo, str] | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
            return None
        if repo.gated_token and self.headers.get("Authorization") != f"Bearer {repo.gated_token}":
            self._error(
                401 if "Authorization" not in self.headers else 403,
                "GatedRepo",
                f"Access to model {repo_id} is restricted. You must have access to it and be authenticated.",
            )
            return None
        commit = repo.branches.get(revision, revision if revision in repo.commits else None)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo, commit

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        with self.hub._lock:
            self.hub.requests.append((self.command, path, self.headers.get("Range")))
        api = re.match(r"^/api/models/([^/]+/[^/]+)/(revision|tree)/([^/]+)(/.*)?$", path)
        if api:
            repo_id, kind, revision = api.group(1), api.group(2), api.group(3)
            found = self._repo(repo_id, revision)
            if found is None:
                return
            repo, commit = found
            files = repo.commits[commit]
            if kind == "revision":
                return self._json(
                    {
                        "id": repo_id,
                        "modelId": repo_id,
                        "sha": commit,
                        "private": False,
                        "gated": "manual" if repo.gated_token else False,
                        "siblings": [{"rfilename": p} for p in sorted(files)],
                    }
                )
            entries = []
            for name, data in sorted(files.items()):
                entry = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": name}
                if name.endswith(LFS_SUFFIXES):
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entries.append(entry)
            return self._json(entries)
        resolve = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if not resolve:
            return self._error(404, "EntryNotFound", f"no route for {path}")
        found = self._repo(resolve.group(1), resolve.group(2))
        if found is None:
            return
        repo, commit = found
        name = resolve.group(3)
        data = repo.commits[commit].get(name)
        if data is None:
            return self._error(404, "EntryNotFound", f"{name} does not exist at {commit}")
        lfs = name.endswith(LFS_SUFFIXES)
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        start = 0
        ranged = re.match(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if ranged and not head:
            start = int(ranged.group(1))
        body = data[start:]
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{etag}"')
        if lfs:
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if head:
            return
        cut = self.hub.cut_once.pop(name, None)
        if cut is not None and cut < len(body):
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)
