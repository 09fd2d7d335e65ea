"""One judge of a URL that comes from outside (the environment, a kubeconfig) before a client library
connects to it, and one way to show it: HF_ENDPOINT, the proxy variables and a kubeconfig's cluster
`server` each went to a library that parsed it in its own way, so `https://a..b` (a name IDNA
cannot encode) or a port of 99999 ended in a UnicodeError or ValueError traceback where the socket was
opened, and a `https://user:password@host` was printed whole in an error. Here a URL is refused with
words (`url_problem`) and shown without its user and password (`shown_url`)."""

from __future__ import annotations

import importlib.util
import os
import re
from urllib.parse import urlsplit
from urllib.request import getproxies_environment

_USERINFO = re.compile(r"(//)[^/?#@\s]*@")


def shown_url(url: str) -> str:
    """`url` as a message shows it: any `user:password@` written `***@`, and as Python quotes it when
    it holds a character that is not printable (it stays on its line)."""
    text = _USERINFO.sub(r"\1***@", url)
    return text if text.isprintable() else repr(text)


def hostname_problem(host: str) -> str | None:
    """Why `host` (a URL's host, without brackets) is no name a connection can be made to, or None:
    what IDNA refuses (an empty label as in `a..b`, a label over 63 characters) and a name over 253
    characters."""
    if not host:
        return "it names no host"
    if ":" in host:  # an IPv6 address: urlsplit checked it
        return None
    try:
        encoded = host.rstrip(".").encode("idna")
    except UnicodeError:
        return f"its host {shown_url(host)} is no name: a label is empty or longer than 63 characters"
    if len(encoded) > 253:
        return f"its host is {len(encoded)} characters long, more than the 253 a name may have"
    return None


def url_problem(url: str, schemes: tuple[str, ...]) -> str | None:
    """Why `url` is no URL of one of `schemes` that a connection can be made to, or None: a space or
    a control character, a scheme of another kind, no host, a host IDNA refuses, a port that is no
    number from 1 to 65535."""
    if not url.isprintable() or any(c.isspace() for c in url):
        return "it holds a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # urllib's words: "Invalid IPv6 URL", "Port out of range 0-65535"
        return _USERINFO.sub(r"\1***@", str(exc))
    if parts.scheme not in schemes:
        return f"its scheme is {parts.scheme or 'missing'}, not {' or '.join(schemes)}"
    if port == 0:
        return "its port is 0"
    return hostname_problem(parts.hostname or "")


PROXY_FIX = "set it to http://HOST:PORT (socks5:// needs the socksio package), or unset it"


def proxy_problem() -> str | None:
    """The proxy variable an HTTP client of httpx's (huggingface_hub's, lightkube's) cannot use, in
    words (`NAME=VALUE is not a proxy URL a client can use (why)`), or None. They are read as httpx
    reads them: http_proxy, https_proxy and all_proxy in either case, a value without `://` taken as
    http://, none at all with NO_PROXY=*; a host IDNA refuses failed only where the socket was opened
    (a UnicodeError), an unknown scheme when the client was made."""
    proxies = getproxies_environment()
    if "*" in (h.strip() for h in proxies.get("no", "").split(",")):
        return None
    socks = importlib.util.find_spec("socksio") is not None  # httpx speaks SOCKS only with it
    schemes = ("http", "https", "socks5", "socks5h") if socks else ("http", "https")
    for scheme in ("http", "https", "all"):
        value = proxies.get(scheme)
        if not value:
            continue
        why = url_problem(value if "://" in value else f"http://{value}", schemes)
        if why:
            name = next((n for n in sorted(os.environ) if n.lower() == f"{scheme}_proxy"), f"{scheme.upper()}_PROXY")
            return f"{name}={shown_url(value)} is not a proxy URL a client can use ({why})"
    return None
