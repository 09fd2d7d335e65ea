"""What huggingface_hub would read from this host on our behalf, read and checked here first: the
environment it parses (HF_ENDPOINT, the proxy variables httpx takes, its two timeouts) and the
Hugging Face token (HF_TOKEN, else the token file).

Why: huggingface_hub reads these itself, without bounds. Its import turns HF_HUB_ETAG_TIMEOUT=abc
into a ValueError; its get_token() reads $HF_TOKEN_PATH (or $HF_HOME/token) with a plain
read_text(), so a FIFO there hung `plan`, /dev/zero ate the memory, and a folder or HF_HOME=/dev/null
ended in a traceback; a host name IDNA cannot encode (`https://a..b`, a label over 63 characters),
in HF_ENDPOINT or a proxy, was a UnicodeError. Here each such value is one HubError that names the
variable or the file and says what to do, raised before huggingface_hub is imported or asked.

The token file is read by the one bounded reader (safe_read.HUB_TOKEN: a regular file, never
waiting, at most 64 KiB) and handed to huggingface_hub explicitly (`token=token() or False`): with
None it would look for the token itself, through its own reads (the token file, the stored-tokens
file, an OAuth refresh that writes them). `prepared()` also turns off huggingface_hub's telemetry,
whose user agent reads and rewrites `$HF_HOME/.agent_harnesses.json` on the first request.
"""

from __future__ import annotations

import configparser
import os
import time
from pathlib import Path

from aigo_apply import safe_read
from aigo_apply.adapters.urls import PROXY_FIX, proxy_problem, shown_url, url_problem
from aigo_apply.errors import HubError, Unreadable

TIMEOUTS = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")  # seconds, as int() reads them
MOST_SECONDS = 10**6
_TRUE = ("1", "true", "yes", "on")


def endpoint() -> str:
    """HF_ENDPOINT (else the Hub), checked: called before huggingface_hub is imported, since that
    import parses it too, and a malformed one (`http://[::1`, a port of 99999, `https://a..b`) ended
    in a traceback."""
    value = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    why = url_problem(value, ("http", "https"))
    if why:
        raise HubError(
            f"HF_ENDPOINT={shown_url(value)} is not the URL of a Hub ({why})",
            "set it to http(s)://HOST[:PORT] (a port from 1 to 65535), or unset it for https://huggingface.co",
        )
    return value


def check_environment() -> None:
    """Every variable huggingface_hub and its HTTP client parse, checked (HubError names the first
    that cannot be used): HF_ENDPOINT, the proxy variables (http_proxy, https_proxy, all_proxy in
    either case, as httpx reads them: a value without `://` is taken as http://; none with
    NO_PROXY=*), HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT."""
    endpoint()
    proxy = proxy_problem()
    if proxy:
        raise HubError(f"{proxy} (the Hub's client reads it)", PROXY_FIX)
    for name in TIMEOUTS:
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            seconds = int(value)
        except ValueError:
            seconds = -1
        if not 0 <= seconds <= MOST_SECONDS:
            raise HubError(
                f"{name}={shown_url(value)} is not a whole number of seconds from 0 to {MOST_SECONDS}",
                "set it to one (0 or unset: huggingface_hub's default of 10), or unset it",
            )


def prepared() -> None:
    """The environment checked, then huggingface_hub imported with its telemetry off (see the module's
    docstring). Every use of huggingface_hub begins here."""
    check_environment()
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True


def token_file() -> tuple[Path, str]:
    """Where huggingface_hub keeps this host's token, and what named it: $HF_TOKEN_PATH, else
    $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token (each
    with `~` and `$VAR` expanded, as huggingface_hub expands them)."""
    if os.environ.get("HF_TOKEN_PATH"):
        return _expanded(os.environ["HF_TOKEN_PATH"], "HF_TOKEN_PATH"), "HF_TOKEN_PATH"
    if os.environ.get("HF_HOME"):
        return _expanded(os.environ["HF_HOME"], "HF_HOME") / "token", "HF_HOME"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return _expanded(cache, "XDG_CACHE_HOME") / "huggingface" / "token", "the default place"


def _expanded(text: str, name: str) -> Path:
    return safe_read.home_path(os.path.expandvars(text), name)


def token() -> str | None:
    """This host's Hugging Face token, found where huggingface_hub finds it (with HF_OIDC_RESOURCE, the
    token it exchanges; else HF_TOKEN, else the older HUGGING_FACE_HUB_TOKEN, else the token file:
    `token_file`), but read by the one bounded reader;
    None when there is none, or when HF_HUB_DISABLE_IMPLICIT_TOKEN says not to send one. Callers pass
    `token=token() or False` (None would let huggingface_hub look for it again itself). HubError
    when the file cannot be read or the token is no token; its value is never in a message."""
    check_environment()
    if os.environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN", "").strip().lower() in _TRUE:
        return None
    if os.environ.get("HF_OIDC_RESOURCE"):  # a CI's short-lived token (Trusted Publishers): no file is read
        return _exchanged()
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        found = _clean(os.environ.get(name))
        if found:
            return _checked(found, f"the environment variable {name}")
    path, named = token_file()
    display = f"the Hugging Face token file {safe_read.shown(path)} ({named})"
    try:
        raw = safe_read.read(path, safe_read.HUB_TOKEN, display, missing_ok=True)
    except Unreadable as exc:
        raise HubError(f"{exc.display} {exc.reason}", exc.fix) from None
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HubError(f"{display} is not UTF-8 text", safe_read.HUB_TOKEN.fix) from None
    found = _clean(text)
    return _renewed(_checked(found, display), path) if found else None


RENEW_BEFORE = 24 * 3600  # huggingface_hub renews an OAuth token this long before it expires


def _renewed(found: str, path: Path) -> str:
    """The token of the file, renewed first when it is an OAuth token of `hf auth login`'s browser
    login that expires within a day (its `stored_tokens` beside the token file, read bounded here,
    says so): then huggingface_hub itself renews it (both files were just judged regular and small)
    and writes the new one. Any other token, or a stored-tokens file that cannot be read, is used
    as it is."""
    try:
        raw = safe_read.read(path.parent / "stored_tokens", safe_read.HUB_TOKEN, missing_ok=True)
        stored = configparser.ConfigParser(interpolation=None)
        stored.read_string(raw.decode("utf-8") if raw else "")
        fields = next((dict(stored[n]) for n in stored.sections() if stored[n].get("hf_token") == found), {})
        expires = int(fields.get("expires_at", "")) if fields.get("refresh_token") else None
    except (Unreadable, UnicodeDecodeError, configparser.Error, ValueError):
        return found
    if expires is None or expires - RENEW_BEFORE > time.time():
        return found
    prepared()
    from huggingface_hub import get_token

    try:
        renewed = get_token()
    except Exception:  # huggingface_hub's renewal warns and keeps the token; anything else: keep it too
        return found
    return _checked(renewed, f"the token huggingface_hub renewed in {safe_read.shown(path)}") if renewed else found


def _exchanged() -> str | None:
    """The token huggingface_hub exchanges for the CI's OIDC identity token (HF_OIDC_RESOURCE set: it
    asks the Hub, and reads no file, before anything else); its failure is one HubError."""
    prepared()
    from huggingface_hub import get_token

    try:
        found = get_token()
    except Exception as exc:  # huggingface_hub's OIDCError, or the exchange's HTTP failure
        detail = shown_url(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
        raise HubError(
            f"HF_OIDC_RESOURCE is set, and no Hugging Face token could be had for it ({detail})",
            "set HF_OIDC_ID_TOKEN in CI, or unset HF_OIDC_RESOURCE (and use HF_TOKEN)",
        ) from None
    return _checked(found, "the token exchanged for HF_OIDC_RESOURCE") if found else None


def _clean(value: str | None) -> str | None:
    """As huggingface_hub cleans a token: line breaks removed, white space stripped, empty is none."""
    if value is None:
        return None
    return value.replace("\r", "").replace("\n", "").strip() or None


def _checked(value: str, source: str) -> str:
    """A token goes into an HTTP header: printable ASCII only (never shown)."""
    if not (value.isascii() and value.isprintable()):
        raise HubError(
            f"{source} holds characters no Hugging Face token has (a control character, or one beyond ASCII)",
            "put the token itself there (hf_...), or run `hf auth login` again",
        )
    return value
