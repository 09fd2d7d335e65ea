"""The Kubernetes API server, through lightkube: the only module that imports it, and only on the
Kubernetes path (lightkube with httpx2 costs about 130 ms to import; Docker users never pay it).

Objects go in and come out as plain dicts: each kind is a generic lightkube resource (a dict), so
nothing is dropped or refused by typed models and the kube/ modules never see a lightkube type. One
call per operation: a LIST per kind with the project's label selector, a server-side apply PATCH
(`application/apply-patch+yaml`, fieldManager=aigo-apply, force only when asked), a DELETE, a GET.
lightkube's and httpx2's exceptions become ours here and only here (`_errors`): an unreachable
cluster, refused credentials and missing RBAC permission each say what to check; a 409 on apply
names the other field manager(s) and fields and says that `--force-conflicts` takes them over."""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from aigo_apply.adapters.kube_exec import exec_auth
from aigo_apply.adapters.kubeconfig import read_kubeconfig
from aigo_apply.adapters.urls import PROXY_FIX, proxy_problem, shown_url, url_problem
from aigo_apply.errors import KubeConflict, KubeError, KubeUnavailable
from aigo_apply.json_types import JsonMap, JsonObject

if TYPE_CHECKING:
    import httpx2
    from lightkube import Client
    from lightkube.config.kubeconfig import SingleConfig
    from lightkube.core.client import FieldSelector, LabelSelector
    from lightkube.generic_resource import GenericNamespacedResource

FIELD_MANAGER = "aigo-apply"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
# kind -> (API group, version, plural): every kind the tool writes or reads
KINDS: dict[str, tuple[str, str, str]] = {
    "Secret": ("", "v1", "secrets"),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims"),
    "ConfigMap": ("", "v1", "configmaps"),
    "Service": ("", "v1", "services"),
    "Pod": ("", "v1", "pods"),
    "Event": ("", "v1", "events"),
    "Job": ("batch", "v1", "jobs"),
    "Deployment": ("apps", "v1", "deployments"),
}
MAX_LOG_LINE = 2000  # characters of one log line kept for a failure message
_MANAGER = re.compile(r'conflict with "([^"]{1,253})"')


def resource_name(kind: str) -> str:
    """How RBAC and kubectl name a kind's resource: `deployments.apps`, `secrets`."""
    group, _, plural = KINDS[kind]
    return f"{plural}.{group}" if group else plural


class KubeClient:
    """One namespace of one cluster, as the tool uses it. Build it with `connect` (a kubeconfig)
    or `over_transport` (tests: an httpx2 transport that answers like the API server)."""

    def __init__(self, client: Client, namespace: str, server: str, context: str):
        self._client, self.namespace, self.server, self.context = client, namespace, server, context
        self._resources: dict[str, type[GenericNamespacedResource]] = {}

    @classmethod
    def connect(
        cls, kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None
    ) -> KubeClient:
        """From a kubeconfig file (KUBECONFIG's first existing file, else ~/.kube/config, when not
        named) and one of its contexts (its current one when not named)."""
        from lightkube.config.kubeconfig import KubeConfig
        from lightkube.core.exceptions import ConfigError

        path = kubeconfig or _default_kubeconfig()
        data = read_kubeconfig(path, context)  # any shape: a clear error naming the file and the place in it
        config = None
        try:
            config = KubeConfig.from_dict(data, fname=Path(path).expanduser())
            single = config.get(context_name=context)
        except ConfigError as exc:
            known = f" (contexts in it: {', '.join(sorted(config.contexts))})" if config is not None else ""
            raise KubeUnavailable(
                f"cannot use the kubeconfig {path}: {shown_url(str(exc))}{known}; set kubernetes.context in aigo.yaml, or "
                "KUBECONFIG, to a working one (`kubectl config get-contexts` lists them)"
            ) from None
        except Exception as exc:  # lightkube's models refuse a wrong type inside an entry with assorted errors
            raise KubeUnavailable(
                f"cannot read the kubeconfig {path}: {type(exc).__name__}: {shown_url(str(exc))}"
            ) from None
        assert single is not None  # get() raises rather than answering None without a default
        return cls._build(single, namespace or single.namespace, None)

    @classmethod
    def over_transport(
        cls, transport: httpx2.BaseTransport, namespace: str, server: str = "https://kube.test"
    ) -> KubeClient:
        """A client whose every request goes to `transport` (an httpx2 transport), for tests."""
        from lightkube.config.kubeconfig import KubeConfig
        from lightkube.config.models import Cluster, User

        config = KubeConfig.from_one(cluster=Cluster(server=server), user=User(token="test"), namespace=namespace)
        single = config.get()
        assert single is not None
        return cls._build(single, namespace, transport)

    @classmethod
    def _build(cls, single: SingleConfig, namespace: str, transport: httpx2.BaseTransport | None) -> KubeClient:
        from lightkube import Client

        server = str(single.cluster.server)  # shown without its user and password (shown_url), always
        why = url_problem(server, ("https", "http"))
        if why:
            raise KubeUnavailable(
                f"cannot use context {single.context_name!r}: its cluster's server {shown_url(server)} is not the URL "
                f"of an API server ({why}); fix the kubeconfig's clusters[].cluster.server"
            )
        proxy = proxy_problem() if transport is None else None
        if proxy:
            raise KubeUnavailable(f"cannot reach context {single.context_name!r}: {proxy}; {PROXY_FIX}")
        try:
            client = Client(single, namespace=namespace, field_manager=FIELD_MANAGER, transport=transport)
        except Exception as exc:  # lightkube's config checks raise assorted types (ConfigError, assert, OSError)
            raise KubeUnavailable(f"cannot use context {single.context_name!r}: {shown_url(str(exc))}") from None
        user = single.user
        if user is not None and user.exec is not None and user.token is None and user.token_file is None:
            client._client._client.auth = exec_auth(user.exec)  # bounded (lightkube's waited forever)
        return cls(client, namespace, shown_url(server), str(single.context_name))

    def close(self) -> None:
        self._client.close()

    # -- reads ------------------------------------------------------------------------------------
    def list(
        self, kind: str, labels: Mapping[str, str] | None = None, fields: dict[str, str] | None = None
    ) -> builtins.list[JsonObject]:
        """Every object of `kind` in the namespace that matches the selectors, in ONE request
        (kind and apiVersion set on each item: a list's items come without them)."""
        group, version, _ = KINDS[kind]
        api_version = f"{group}/{version}" if group else version
        with self._errors("list", kind):
            label_selector: LabelSelector | None = dict(labels) if labels is not None else None
            field_selector: FieldSelector | None = dict(fields) if fields is not None else None
            found = self._client.list(
                self._resource(kind), namespace=self.namespace, labels=label_selector, fields=field_selector
            )
            items = [dict(item) for item in found]
        return [{**item, "apiVersion": api_version, "kind": kind} for item in items]

    def get(self, kind: str, name: str) -> JsonObject | None:
        """The object, or None when there is none of that name."""
        with self._errors("get", kind, name, missing_ok=True):
            return dict(self._client.get(self._resource(kind), name, namespace=self.namespace))
        return None

    def events(self, kind: str, name: str) -> builtins.list[JsonObject]:
        """The events the cluster recorded about one object (scheduling, pulls, back-offs)."""
        return self.list("Event", fields={"involvedObject.kind": kind, "involvedObject.name": name})

    def log_tail(self, pod: str, container: str | None = None, lines: int = 20) -> builtins.list[str]:
        """The last lines a pod's container wrote ([] when it has none yet, or they are gone)."""
        try:
            with self._errors("get", "Pod", pod, missing_ok=True):
                text = self._client.log(
                    pod, namespace=self.namespace, container=container, tail_lines=lines, newlines=False
                )
                return [line[:MAX_LOG_LINE] for line in list(text)[-lines:]]
        except KubeError as exc:
            if exc.code in (400, 404):  # no container has run yet: nothing to show
                return []
            raise
        return []

    def log_lines(self, pod: str, container: str, follow: bool, tail: int | None, since_s: int | None) -> Iterator[str]:
        """A pod's container output line by line: the last `tail` lines (all: None) of the last
        `since_s` seconds (all: None), then, with `follow`, each new line until the container stops."""
        with self._errors("get", "Pod", pod):
            lines = self._client.log(
                pod,
                namespace=self.namespace,
                container=container,
                follow=follow,
                tail_lines=tail,
                since=since_s,
                newlines=False,
            )
            yield from lines

    def proxy_get(self, service: str, port: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        """GET `path` of a Service of the namespace through the API server's service proxy
        (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH`; RBAC: get services/proxy): the
        answer's status code and text. A refused credential or permission raises; any other answer
        (a 503 while the Service has no ready endpoint) is returned for the caller to judge. No
        Authorization header of the caller's own goes along: the API server would take it for a
        credential and strip it before proxying; `headers` go to the Service as they are."""
        import httpx2
        from lightkube.core.exceptions import ConfigError

        url = f"/api/v1/namespaces/{self.namespace}/services/{service}:{port}/proxy/{path.lstrip('/')}"
        what = f"services/proxy {service}:{port}"
        try:
            # lightkube has no raw request: its httpx2 client (base URL, TLS and credentials of the
            # kubeconfig) sends this one; lightkube.Client._client is its GenericSyncClient
            response = self._client._client._client.get(url, headers=headers or {})
        except httpx2.TransportError as exc:
            raise KubeUnavailable(
                f"cannot reach the Kubernetes API server {self.server} (context {self.context!r}): "
                f"{type(exc).__name__}: {shown_url(str(exc)) or 'no answer'}"
            ) from None
        except ConfigError as exc:
            raise KubeUnavailable(
                f"cannot get credentials for context {self.context!r}: {shown_url(str(exc))}; check the kubeconfig's user entry"
            ) from None
        if (
            response.status_code == 401 and _json(response).get("kind") == "Status"
        ):  # the API server's, not the router's
            raise self._api_error("get", "Service", what, 401, _json(response))
        if response.status_code == 403:
            message = str(_json(response).get("message") or "").strip()[:1000]
            raise KubeUnavailable(
                f"get {what} in namespace {self.namespace!r} of context {self.context!r} is forbidden (403): "
                f"{message or 'no reason given'}; apply asks the router through the API server's service "
                f"proxy whether it routes each model, so the account needs RBAC permission to get "
                f"services/proxy there (check with `kubectl auth can-i get services/proxy -n {self.namespace}`; "
                f'grant it with a Role rule apiGroups: [""], resources: ["services/proxy"], verbs: ["get"])',
                403,
                str(_json(response).get("reason") or "Forbidden"),
            )
        return response.status_code, response.text

    # -- writes -----------------------------------------------------------------------------------
    def apply(self, obj: JsonObject, force: bool = False) -> JsonObject:
        """Server-side apply of a whole object as field manager aigo-apply; the object as stored."""
        from lightkube.types import PatchType

        kind, name = _identity(obj)
        meta = obj.get("metadata")  # a mapping: _identity refused any other
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        if namespace not in (None, self.namespace):
            raise KubeError(f"{kind} {name} names namespace {namespace!r}, not {self.namespace!r}; nothing was sent")
        with self._errors("patch", kind, name):
            return dict(
                self._client.patch(
                    self._resource(kind),
                    name,
                    obj,
                    namespace=self.namespace,
                    patch_type=PatchType.APPLY,
                    field_manager=FIELD_MANAGER,
                    force=force,
                )
            )
        raise KubeError(f"apply {kind} {name}: no answer")  # not reached: _errors raises or the block returned

    def delete(self, kind: str, name: str) -> bool:
        """Delete one object (its pods with it); False when it was already gone."""
        from lightkube.types import CascadeType

        with self._errors("delete", kind, name, missing_ok=True):
            self._client.delete(self._resource(kind), name, namespace=self.namespace, cascade=CascadeType.BACKGROUND)
            return True
        return False

    # -- lightkube plumbing -----------------------------------------------------------------------
    def _resource(self, kind: str) -> type[GenericNamespacedResource]:
        """A generic (dict) resource class per kind, made once, kept out of lightkube's registry."""
        if kind not in self._resources:
            from lightkube.generic_resource import GenericNamespacedResource, create_api_info

            group, version, plural = KINDS[kind]
            info = create_api_info(group, version, kind, plural)
            self._resources[kind] = type(kind, (GenericNamespacedResource,), {"_api_info": info})
        return self._resources[kind]

    @contextmanager
    def _errors(self, verb: str, kind: str, name: str = "", missing_ok: bool = False) -> Iterator[None]:
        """Map lightkube's and httpx2's exceptions to ours; with `missing_ok` a 404 ends the block
        quietly (the caller's code after the `with` runs) instead of raising."""
        import httpx2
        import msgspec
        from lightkube.core.exceptions import ApiError, ConfigError

        what = f"{kind} {name}".strip() if name else resource_name(kind)
        try:
            yield
        except ApiError as exc:
            body = _json(exc.response)
            code = exc.response.status_code if exc.response is not None else int(body.get("code") or 0)
            if code == 404 and missing_ok:
                return
            raise self._api_error(verb, kind, what, code, body) from None
        except httpx2.HTTPStatusError as exc:  # an error answer that is not a Status (a proxy's page)
            code = exc.response.status_code
            if code == 404 and missing_ok:
                return
            raise self._api_error(verb, kind, what, code, {}) from None
        except httpx2.TransportError as exc:
            raise KubeUnavailable(
                f"cannot reach the Kubernetes API server {self.server} (context {self.context!r}): "
                f"{type(exc).__name__}: {shown_url(str(exc)) or 'no answer'}; check that the cluster runs and that "
                "kubernetes.context in aigo.yaml (or kubectl's current context) names it"
            ) from None
        except ConfigError as exc:  # credentials from the kubeconfig (an exec plugin, a token file) failed
            raise KubeUnavailable(
                f"cannot get credentials for context {self.context!r}: {shown_url(str(exc))}; check the kubeconfig's user entry"
            ) from None
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            raise KubeError(
                f"{verb} {what}: the API server's answer could not be read ({shown_url(str(exc))})"
            ) from None

    def _api_error(self, verb: str, kind: str, what: str, code: int, body: JsonMap) -> KubeError:
        message = str(body.get("message") or "").strip()[:1000]
        reason = str(body.get("reason") or "")
        where = f"namespace {self.namespace!r} of context {self.context!r}"
        if code == 401:
            return KubeUnavailable(
                f"the API server {self.server} refused the credentials of context {self.context!r} "
                "(401 Unauthorized); log in again or refresh the kubeconfig's token, then retry",
                code,
                reason,
            )
        if code == 403:
            resource = resource_name(kind)
            return KubeUnavailable(
                f"{verb} {what} in {where} is forbidden (403): {message or 'no reason given'}; the account needs "
                f"RBAC permission to {verb} {resource} there (check with `kubectl auth can-i {verb} {resource} "
                f"-n {self.namespace}`)",
                code,
                reason,
            )
        if code == 409 and verb == "patch":
            return conflict_error(what, body)
        detail = f"{code} {reason}".strip() + (f": {message}" if message else "")
        return KubeError(f"{verb} {what} in {where}: the API server answered {detail}", code, reason)


def conflict_error(what: str, body: JsonMap) -> KubeConflict:
    """A 409 on server-side apply, worded from the Status's details.causes: which field manager
    owns which field, and how to take them over."""
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    managers: list[str] = []
    fields: list[str] = []
    for cause in causes if isinstance(causes, list) else []:
        if not isinstance(cause, dict):
            continue
        match = _MANAGER.search(str(cause.get("message") or ""))
        if match and match.group(1) not in managers:
            managers.append(match.group(1))
        field = str(cause.get("field") or "")[:200]
        if field and field not in fields:
            fields.append(field)
    who = ", ".join(f'"{m}"' for m in managers) or "another field manager"
    owned = ", ".join(fields) or "fields it sets"
    noun = "field manager" if len(managers) <= 1 else "field managers"
    message = (
        f"{what}: server-side apply conflicts with {noun} {who}, which owns {owned} (another tool, or a hand "
        "edit with kubectl, changed it since); nothing of this object was changed. Apply again with "
        "--force-conflicts to take these fields over (their values become aigo.yaml's), or undo the other "
        "change"
    )
    return KubeConflict(message, tuple(managers), tuple(fields))


def _identity(obj: JsonMap) -> tuple[str, str]:
    kind = obj.get("kind")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if kind not in KINDS or not isinstance(name, str) or not name:
        raise KubeError(f"refusing to apply an object of kind {kind!r} named {name!r}: not one aigo-apply makes")
    return str(kind), name


def _json(response: httpx2.Response | None) -> JsonObject:
    try:
        body = response.json() if response is not None else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _default_kubeconfig() -> str:
    """kubectl's order: the first existing file KUBECONFIG lists, else ~/.kube/config."""
    for path in (os.environ.get("KUBECONFIG") or "").split(os.pathsep):
        if path and os.path.isfile(os.path.expanduser(path)):
            return path
    return os.path.expanduser("~/.kube/config")
