"""An httpx2 transport that answers like a Kubernetes API server, for the kinds aigo-apply uses
(Secret, PersistentVolumeClaim, Job, ConfigMap, Service, Deployment, Pod, Event). No API server can
be had on these machines, so the real lightkube client is tested over this one.

What it does like the real one, closely enough to matter:
- objects stored per namespace; LIST honours labelSelector (=, ==, !=, in, notin, exists, !exists)
  and fieldSelector (=, ==, != on dotted paths) and answers a List whose items carry no kind;
- server-side apply (PATCH application/apply-patch+yaml): fieldManager required; creates when absent
  (201); tracks which field paths each manager owns (leaves; a list is one value) and shows them
  as managedFields; a field another manager owns with another value is a 409 Conflict whose
  details.causes read `conflict with "MANAGER" using apps/v1` and `.spec.replicas`; force=true
  takes them over; fields this manager stops applying are removed; resourceVersion bumps on every
  change, metadata.generation on a spec change (Deployments and Jobs); Secret stringData -> data;
- DELETE (and the pods of a deleted Deployment or Job with it); pod logs with tailLines;
- 404 Status for an unknown path or object, 401 / 403 / connection refused on demand;
- the service proxy (`/api/v1/namespaces/NS/services/[http:]NAME[:PORT]/proxy/PATH`, RBAC `get
  services/proxy`) to the router: 503 "no endpoints available" while its Deployment has no
  available replica; `/v1/models` lists the aliases of the router ConfigMap's models.map whose
  model Deployment is available, except those in `router_down` (a model the router's health checks
  never pass); with the router's key Secret present, `/v1/models` is HAProxy's 401 (the API server
  strips the caller's Authorization header) and `/metrics` gives `haproxy_backend_active_servers`
  per backend, with a key in X-Aigo-Router-Key unless the router's haproxy.cfg serves /metrics before
  its key check (router.metrics_without_key).

A small controller plays the rest of the cluster: after each apply that changes a Deployment's
spec it rolls out as `script(name, outcome)` says (ready, progressing for a few GETs, Pending
Unschedulable, ImagePullBackOff, CrashLoopBackOff with a log tail), removing the old pod first
under strategy Recreate; a Job completes or fails. Every request is recorded (`requests`)."""

from __future__ import annotations

import base64
import copy
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx2

KINDS = {  # plural -> (group, version, kind)
    "secrets": ("", "v1", "Secret"),
    "persistentvolumeclaims": ("", "v1", "PersistentVolumeClaim"),
    "configmaps": ("", "v1", "ConfigMap"),
    "services": ("", "v1", "Service"),
    "pods": ("", "v1", "Pod"),
    "events": ("", "v1", "Event"),
    "jobs": ("batch", "v1", "Job"),
    "deployments": ("apps", "v1", "Deployment"),
}
PLURAL = {kind: plural for plural, (_, _, kind) in KINDS.items()}
APPLY = "application/apply-patch+yaml"
GPU_MESSAGE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
_PROXY = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?P<svc>[^/]+)/proxy(?P<rest>/.*)?$")
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/namespaces/(?P<ns>[^/]+)/"
    r"(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>log))?$"
)
IDENTITY = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}
OWN_ROOTS = ("metadata", "spec", "data", "stringData", "type", "immutable")  # what an apply can own


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any
    probe: str | None = None  # the X-Aigo-Router-Key header, as the service proxy passed it on


@dataclass
class Script:
    outcome: str = "ready"  # ready | progressing | unschedulable | image_pull | crash | (Job) complete | failed
    gets: int = 0  # progressing: GETs of the Deployment before it becomes ready
    message: str = ""
    log: list[str] = field(default_factory=list)
    exit_code: int = 1


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> httpx2.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }
    return httpx2.Response(code, json=body)


class FakeKubeAPI(httpx2.BaseTransport):
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, namespace, name) -> object
        self.owners: dict[tuple[str, str, str], dict[str, tuple[str, set[tuple[str, ...]]]]] = {}
        self.requests: list[Recorded] = []
        self.scripts: dict[str, Script] = {}
        self.logs: dict[tuple[str, str], list[str]] = {}  # (namespace, pod) -> lines
        self.deny: set[tuple[str, str]] = set()  # (verb, plural) answered 403
        self.unauthorized = False
        self.router_down: set[str] = set()  # aliases the router's /v1/models never lists
        self.unreachable = False
        self._rv = itertools.count(100)
        self._ids = itertools.count(1)
        self._progress: dict[tuple[str, str, str], int] = {}
        self._lock = threading.RLock()

    # -- test controls ----------------------------------------------------------------------------
    def script(self, name: str, outcome: str, **params: Any) -> None:
        """How the next rollouts of Deployment (or Job) `name` go."""
        self.scripts[name] = Script(outcome, **params)

    def seed(
        self, obj: dict[str, Any], manager: str | None = "kubectl-client-side-apply", operation: str = "Update"
    ) -> None:
        """Store an object as another tool made it (owned by `manager`, or by nobody)."""
        obj = copy.deepcopy(obj)
        kind, meta = obj["kind"], obj.setdefault("metadata", {})
        key = (kind, meta.setdefault("namespace", "lab"), meta["name"])
        meta.update(uid=f"uid-{next(self._ids)}", resourceVersion=str(next(self._rv)))
        if kind in ("Deployment", "Job"):
            meta["generation"] = 1
        self.objects[key] = obj
        self.owners[key] = {manager: (operation, set(leaves(obj)))} if manager else {}
        self._show_managed(key)

    def put(self, obj: dict[str, Any]) -> None:
        self.seed(obj, manager=None)

    def event(self, namespace: str, kind: str, name: str, reason: str, message: str, type_: str = "Warning") -> None:
        n = next(self._ids)
        self.put(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{n:016x}", "namespace": namespace},
                "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
            }
        )

    def get(self, kind: str, name: str, namespace: str = "lab") -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def names(self, kind: str, namespace: str = "lab") -> list[str]:
        return sorted(n for k, ns, n in self.objects if k == kind and ns == namespace)

    def managers(self, kind: str, name: str, namespace: str = "lab") -> dict[str, set[str]]:
        owners = self.owners.get((kind, namespace, name), {})
        return {m: {"." + ".".join(p) for p in paths} for m, (_, paths) in owners.items()}

    def calls(self, method: str | None = None, plural: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (plural is None or _plural_of(r.path) == plural)
        ]

    # -- the transport ----------------------------------------------------------------------------
    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        with self._lock:  # models apply side by side, from threads
            return self._handle(request)

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        raw = request.read()
        ctype = request.headers.get("content-type")
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        query = dict(
            parse_qsl(request.url.query.decode() if isinstance(request.url.query, bytes) else request.url.query)
        )
        self.requests.append(
            Recorded(request.method, request.url.path, query, ctype, body, request.headers.get("x-aigo-router-key"))
        )
        if self.unreachable:
            raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)
        if self.unauthorized:
            return status(401, "Unauthorized", "Unauthorized")
        proxied = _PROXY.match(request.url.path)
        if proxied:
            if ("get", "services/proxy") in self.deny:
                return self._forbidden("get", "services/proxy", "", proxied.group("ns"), proxied.group("svc"))
            probe = request.headers.get("x-aigo-router-key")  # passed on, as the API server does
            return self._proxy(proxied.group("ns"), proxied.group("svc"), proxied.group("rest") or "/", probe)
        match = _PATH.match(request.url.path)
        if not match or match.group("plural") not in KINDS:
            return status(404, "NotFound", "the server could not find the requested resource")
        group, version, kind = KINDS[match.group("plural")]
        if (match.group("group") or "") != group or (match.group("version") or match.group("core")) != version:
            return status(404, "NotFound", "the server could not find the requested resource")
        ns, name, sub = match.group("ns"), match.group("name"), match.group("sub")
        verb = {"GET": "get" if name else "list", "PATCH": "patch", "DELETE": "delete", "POST": "create"}.get(
            request.method, request.method.lower()
        )
        if (verb, match.group("plural")) in self.deny:
            return self._forbidden(verb, match.group("plural"), group, ns, name)
        if sub == "log" and verb == "get" and kind == "Pod":
            return self._log(ns, name or "", query)
        if verb == "list":
            return self._list(kind, ns, query)
        if verb == "get":
            return self._get(kind, ns, name or "")
        if verb == "patch":
            return self._patch(kind, ns, name or "", ctype, body, query)
        if verb == "delete":
            return self._delete(kind, ns, name or "")
        return status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _forbidden(self, verb: str, plural: str, group: str, ns: str, name: str | None) -> httpx2.Response:
        resource = f"{plural}.{group}" if group else plural
        who = f'{resource} "{name}"' if name else resource
        return status(
            403,
            "Forbidden",
            f'{who} is forbidden: User "dev" cannot {verb} resource "{plural}" in API group "{group}" '
            f'in the namespace "{ns}"',
            {"name": name or "", "group": group, "kind": plural},
        )

    def _proxy(self, ns: str, target: str, path: str, probe: str | None = None) -> httpx2.Response:
        """The router, as the API server's service proxy reaches it (see the module's docstring)."""
        from aigo_apply.config import kube_names as names

        parts = target.split(":")
        if parts[0] in ("http", "https") and len(parts) > 1:
            parts = parts[1:]
        name, port = parts[0], (parts[1] if len(parts) > 1 else "")
        service = self.objects.get(("Service", ns, name))
        if service is None:
            return self._not_found("Service", name)
        ports = service["spec"].get("ports") or []
        if port and not any(port in (str(p.get("name")), str(p.get("port"))) for p in ports):
            return status(503, "ServiceUnavailable", f'no endpoints available for service "{name}:{port}"')
        selector = service["spec"].get("selector") or {}
        serving = [
            d
            for (k, n, _), d in self.objects.items()
            if k == "Deployment"
            and n == ns
            and all(((d["spec"].get("template") or {}).get("metadata") or {}).get("labels", {}).get(lk) == lv
                    for lk, lv in selector.items())
            and int((d.get("status") or {}).get("availableReplicas") or 0) > 0
        ]  # fmt: skip
        if not serving:
            return status(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
        data = (self.objects.get(("ConfigMap", ns, name)) or {}).get("data") or {}
        project = (service["metadata"].get("labels") or {}).get("app.kubernetes.io/instance", ns)
        table = [line.split() for line in str(data.get("models.map") or "").splitlines() if len(line.split()) == 2]

        def up(alias: str) -> bool:
            model = self.objects.get(("Deployment", ns, names.model_name(project, alias))) or {}
            return alias not in self.router_down and int((model.get("status") or {}).get("availableReplicas") or 0) > 0

        keys = ("Secret", ns, name) in self.objects
        cfg = str(data.get("haproxy.cfg") or "")
        metrics_first = "use-service lua.aigo_metrics" in cfg.split("errors/401.json", 1)[0]
        if (
            path == "/metrics"
            and keys
            and not metrics_first
            and probe not in router_keys(self.objects[("Secret", ns, name)])
        ):
            return httpx2.Response(401, json={"error": {"message": "Missing or invalid API key", "code": 401}})
        if path == "/metrics":
            text = "".join(
                f'haproxy_backend_active_servers{{proxy="{backend}"}} {1 if up(alias) else 0}\n'
                for alias, backend in table
            )
            return httpx2.Response(200, text=text, headers={"Content-Type": "text/plain; version=0.0.4"})
        if path == "/v1/models" and keys:
            return httpx2.Response(401, json={"error": {"message": "Missing or invalid API key", "code": 401}})
        if path == "/v1/models":
            cards = [{"id": alias, "object": "model", "owned_by": "vllm"} for alias, _ in table if up(alias)]
            return httpx2.Response(200, json={"object": "list", "data": cards})
        return httpx2.Response(404, json={"error": {"message": "not found", "code": 404}})

    def _list(self, kind: str, ns: str, query: dict[str, str]) -> httpx2.Response:
        labels = parse_selector(query.get("labelSelector", ""))
        fields = parse_fields(query.get("fieldSelector", ""))
        items = []
        for (k, n, _), obj in sorted(self.objects.items()):
            if k == kind and n == ns and labels_match(labels, obj) and fields_match(fields, obj):
                item = copy.deepcopy(obj)
                item.pop("kind", None), item.pop("apiVersion", None)
                items.append(item)
        group, version, _ = KINDS[PLURAL[kind]]
        api_version = f"{group}/{version}" if group else version
        return httpx2.Response(
            200,
            json={
                "kind": f"{kind}List",
                "apiVersion": api_version,
                "metadata": {"resourceVersion": str(next(self._rv))},
                "items": items,
            },
        )

    def _get(self, kind: str, ns: str, name: str) -> httpx2.Response:
        key = (kind, ns, name)
        if key not in self.objects:
            return self._not_found(kind, name)
        if kind == "Deployment" and key in self._progress:
            self._progress[key] -= 1
            if self._progress[key] <= 0:
                del self._progress[key]
                self._roll(key, Script("ready"))
        return httpx2.Response(200, json=self.objects[key])

    def _not_found(self, kind: str, name: str) -> httpx2.Response:
        group = KINDS[PLURAL[kind]][0]
        return status(
            404,
            "NotFound",
            f'{PLURAL[kind]}{"." + group if group else ""} "{name}" not found',
            {"name": name, "group": group, "kind": PLURAL[kind]},
        )

    def _log(self, ns: str, pod: str, query: dict[str, str]) -> httpx2.Response:
        if ("Pod", ns, pod) not in self.objects:
            return self._not_found("Pod", pod)
        lines = self.logs.get((ns, pod))
        if lines is None:
            return status(
                400, "BadRequest", f'container "engine" in pod "{pod}" is waiting to start: ContainerCreating'
            )
        tail = int(query.get("tailLines", len(lines)) or len(lines))
        return httpx2.Response(
            200, text="".join(line + "\n" for line in lines[-tail:] if tail), headers={"Content-Type": "text/plain"}
        )

    def _delete(self, kind: str, ns: str, name: str) -> httpx2.Response:
        key = (kind, ns, name)
        if key not in self.objects:
            return self._not_found(kind, name)
        del self.objects[key]
        self.owners.pop(key, None)
        for pod in [k for k, o in self.objects.items() if k[0] == "Pod" and _owner(o) == (kind, name)]:
            del self.objects[pod]
        return httpx2.Response(
            200,
            json={
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "kind": PLURAL[kind]},
            },
        )

    # -- server-side apply ------------------------------------------------------------------------
    def _patch(
        self, kind: str, ns: str, name: str, ctype: str | None, body: Any, query: dict[str, str]
    ) -> httpx2.Response:
        if ctype != APPLY:
            return status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}")
        manager = query.get("fieldManager")
        if not manager:
            return status(400, "BadRequest", "PATCH requests of type apply must specify a fieldManager")
        if not isinstance(body, dict):
            return status(400, "BadRequest", "error decoding YAML: the object is not a mapping")
        group, version, _ = KINDS[PLURAL[kind]]
        api_version = f"{group}/{version}" if group else version
        meta = body.get("metadata") or {}
        if body.get("kind") != kind or body.get("apiVersion") != api_version:
            return status(
                400,
                "BadRequest",
                f"the API version in the data ({body.get('apiVersion')}) does not "
                f"match the expected API version ({api_version})",
            )
        if meta.get("name") != name or meta.get("namespace", ns) != ns:
            return status(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        body = copy.deepcopy(body)
        existing = self.objects.get((kind, ns, name))
        if kind == "Job" and existing and body.get("spec", {}).get("template") != existing["spec"].get("template"):
            cause = {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: field is immutable",
                "field": "spec.template",
            }
            message = f'Job.batch "{name}" is invalid: spec.template: Invalid value: "...": field is immutable'
            return status(422, "Invalid", message, {"name": name, "group": "batch", "kind": "jobs", "causes": [cause]})
        if kind == "Secret" and "stringData" in body:
            data = body.setdefault("data", {})
            for k, v in body.pop("stringData").items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        applied = leaves(body)
        key = (kind, ns, name)
        owners = self.owners.setdefault(key, {})
        before = copy.deepcopy(self.objects.get(key))
        current = leaves(before) if before else {}
        conflicts = [
            (m, p)
            for m, (_, paths) in sorted(owners.items())
            if m != manager
            for p in sorted(paths)
            if _overlaps(p, applied) and current.get(p) != applied.get(p)
        ]
        if conflicts and query.get("force") != "true":
            causes = [
                {
                    "type": "FieldManagerConflict",
                    "message": f'conflict with "{m}" using {api_version}',
                    "field": "." + ".".join(p),
                }
                for m, p in conflicts
            ]
            text = "; ".join(f"{c['message']}: {c['field']}" for c in causes)
            count = f"{len(causes)} conflict{'s' if len(causes) > 1 else ''}"
            return status(
                409,
                "Conflict",
                f"Apply failed with {count}: {text}",
                {"name": name, "group": group, "kind": PLURAL[kind], "causes": causes},
            )
        for m, p in conflicts:  # forced: the fields change hands
            owners[m][1].discard(p)
        mine = owners.get(manager, ("Apply", set()))[1]
        others = set().union(*(paths for m, (_, paths) in owners.items() if m != manager))
        obj = copy.deepcopy(before) if before else {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
        for path in sorted(mine - set(applied) - others, key=len, reverse=True):
            _remove(obj, path)
        for path, value in applied.items():
            _set(obj, path, copy.deepcopy(value))
        owners[manager] = ("Apply", set(applied))
        if kind == "Deployment":
            obj["spec"].setdefault("replicas", 1)
            obj["spec"].setdefault("strategy", {"type": "RollingUpdate"})
        meta = obj["metadata"]
        meta["namespace"] = ns
        created = before is None
        if created:
            meta.update(uid=f"uid-{next(self._ids)}", creationTimestamp="2025-01-01T00:00:00Z")
        spec_changed = created or {k: v for k, v in obj.items() if k not in ("metadata", "status")} != {
            k: v for k, v in before.items() if k not in ("metadata", "status")
        }
        if created or _comparable(obj) != _comparable(before):
            meta["resourceVersion"] = str(next(self._rv))
        if kind in ("Deployment", "Job") and spec_changed:
            meta["generation"] = int(meta.get("generation") or 0) + 1
        self.objects[key] = obj
        self._show_managed(key)
        if spec_changed and kind in ("Deployment", "Job"):
            self._roll(key, self.scripts.get(name, Script("ready" if kind == "Deployment" else "complete")))
        return httpx2.Response(201 if created else 200, json=self.objects[key])

    def _show_managed(self, key: tuple[str, str, str]) -> None:
        obj = self.objects[key]
        entries = []
        for manager, (operation, paths) in sorted(self.owners.get(key, {}).items()):
            tree: dict[str, Any] = {}
            for path in sorted(paths):
                node = tree
                for part in path:
                    node = node.setdefault(f"f:{part}", {})
            entries.append(
                {
                    "manager": manager,
                    "operation": operation,
                    "apiVersion": obj.get("apiVersion"),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": tree,
                }
            )
        obj["metadata"]["managedFields"] = entries

    # -- the controller: rollouts and jobs --------------------------------------------------------
    def _roll(self, key: tuple[str, str, str], script: Script) -> None:
        kind, ns, name = key
        obj = self.objects[key]
        generation = obj["metadata"].get("generation", 1)
        if kind == "Job":
            return self._job(key, script)
        recreate = (obj["spec"].get("strategy") or {}).get("type") == "Recreate"
        old = [k for k, o in self.objects.items() if k[0] == "Pod" and _owner(o) == ("Deployment", name)]
        if recreate or script.outcome == "ready":
            for pod in old:
                del self.objects[pod]
            old = []
        if script.outcome == "progressing":
            self._progress[key] = max(1, script.gets)
        pod = self._pod(ns, name, obj, script)
        ready_old = len(old)
        ready = script.outcome == "ready"
        available = ready_old + (1 if ready else 0)
        obj["status"] = {
            "observedGeneration": generation,
            "replicas": ready_old + 1,
            "updatedReplicas": 1,
            "readyReplicas": available,
            "availableReplicas": available,
            **({} if ready else {"unavailableReplicas": 1}),
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available else "False",
                    "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if available
                    else "Deployment does not have minimum availability.",
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if ready else "ReplicaSetUpdated",
                    "message": f'ReplicaSet "{pod.rsplit("-", 1)[0]}" is progressing.',
                },
            ],
        }
        return None

    def _pod(self, ns: str, owner: str, obj: dict[str, Any], script: Script, kind: str = "Deployment") -> str:
        n = next(self._ids)
        name = f"{owner}-{n:05x}"
        template = (obj.get("spec") or {}).get("template") or {}
        containers = (template.get("spec") or {}).get("containers") or [{"name": "engine", "image": "?"}]
        first = containers[0]
        status: dict[str, Any] = {"phase": "Pending", "conditions": []}
        state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        extra: dict[str, Any] = {}
        outcome = script.outcome
        if outcome in ("ready", "complete"):
            status["phase"] = "Running" if outcome == "ready" else "Succeeded"
            status["conditions"] = [{"type": "Ready", "status": "True"}]
            state = {"running": {"startedAt": "2025-01-01T00:00:00Z"}}
        elif outcome == "unschedulable":
            message = script.message or GPU_MESSAGE
            status["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ]
            state = {}
            self.event(ns, "Pod", name, "FailedScheduling", message)
        elif outcome == "image_pull":
            image = first.get("image", "?")
            message = (
                script.message
                or f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": not found'
            )
            state = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}}
            self.event(ns, "Pod", name, "Failed", f'Failed to pull image "{image}": {message}')
            self.event(ns, "Pod", name, "BackOff", f'Back-off pulling image "{image}"', "Normal")
        elif outcome in ("crash", "failed"):
            status["phase"] = "Running" if outcome == "crash" else "Failed"
            state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 40s restarting failed container={first.get('name')} pod={name}",
                }
            }
            extra = {"lastState": {"terminated": {"exitCode": script.exit_code, "reason": "Error"}}, "restartCount": 3}
            if outcome == "failed":
                state, extra = {"terminated": {"exitCode": script.exit_code, "reason": "Error"}}, {"restartCount": 0}
            self.logs[(ns, name)] = list(script.log)
            self.event(ns, "Pod", name, "BackOff", "Back-off restarting failed container")
        status["containerStatuses"] = [
            {
                "name": first.get("name"),
                "image": first.get("image"),
                "ready": outcome == "ready",
                "state": state,
                **({"restartCount": 0} | extra),
            }
        ]
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        if kind == "Job":  # what the Job controller adds to its pods
            labels.update({"job-name": owner, "batch.kubernetes.io/job-name": owner})
        self.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [
                        {
                            "kind": "ReplicaSet" if kind == "Deployment" else "Job",
                            "name": f"{owner}-rs" if kind == "Deployment" else owner,
                        }
                    ],
                    "annotations": {"fake/owner": f"{kind}/{owner}"},
                },
                "spec": template.get("spec") or {},
                "status": status,
            }
        )
        return name

    def _job(self, key: tuple[str, str, str], script: Script) -> None:
        _, ns, name = key
        obj = self.objects[key]
        outcome = script.outcome if script.outcome in ("complete", "failed", "progressing") else "complete"
        if outcome == "progressing":
            obj["status"] = {"active": 1}
            return
        self._pod(ns, name, obj, script, kind="Job")
        if outcome == "complete":
            obj["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        else:
            obj["status"] = {
                "failed": 1,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ],
            }


# -- field paths, selectors ----------------------------------------------------------------------------
def leaves(obj: dict[str, Any] | None) -> dict[tuple[str, ...], Any]:
    """Field path -> value of every leaf an apply can own (a list is one value; identity and
    status are not owned; metadata only through its labels and annotations)."""
    out: dict[tuple[str, ...], Any] = {}

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, path + (k,))
        elif path not in IDENTITY:
            out[path] = value

    for root, value in (obj or {}).items():
        if root == "metadata":
            for part in ("labels", "annotations"):
                if isinstance(value.get(part), dict):
                    walk(value[part], (root, part))
        elif root in OWN_ROOTS:
            walk(value, (root,))
    return out


def _overlaps(path: tuple[str, ...], applied: dict[tuple[str, ...], Any]) -> bool:
    return any(p[: len(path)] == path or path[: len(p)] == p for p in applied)


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            obj[part] = {}
        obj = obj[part]
    obj[path[-1]] = value


def _remove(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    parents = []
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            return
        parents.append((obj, part))
        obj = obj[part]
    obj.pop(path[-1], None)
    for parent, part in reversed(parents):  # an emptied mapping goes too
        if parent[part] == {}:
            del parent[part]


def _comparable(obj: dict[str, Any] | None) -> Any:
    obj = copy.deepcopy(obj or {})
    for key in ("resourceVersion", "managedFields", "generation"):
        obj.get("metadata", {}).pop(key, None)
    return obj


def _owner(obj: dict[str, Any]) -> tuple[str, str]:
    kind, _, name = ((obj.get("metadata") or {}).get("annotations") or {}).get("fake/owner", "/").partition("/")
    return kind, name


def _plural_of(path: str) -> str:
    match = _PATH.match(path)
    return match.group("plural") if match else ""


def parse_selector(text: str) -> list[tuple[str, str, set[str]]]:
    """`a=b,c in (d,e),!f` -> [(key, op, values)], op one of = != in notin exists !exists."""
    terms = [t.strip() for t in re.split(r",(?![^()]*\))", text) if t.strip()]
    out = []
    for term in terms:
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term):
            out.append((m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}))
        elif m := re.fullmatch(r"([^=!\s]+)\s*(==|=|!=)\s*(\S*)", term):
            out.append((m.group(1), "!=" if m.group(2) == "!=" else "=", {m.group(3)}))
        elif term.startswith("!"):
            out.append((term[1:], "!exists", set()))
        else:
            out.append((term, "exists", set()))
    return out


def labels_match(selector: list[tuple[str, str, set[str]]], obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, values in selector:
        have = labels.get(key)
        ok = {
            "=": have in values,
            "!=": have not in values,
            "in": have in values,
            "notin": have not in values,
            "exists": key in labels,
            "!exists": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def parse_fields(text: str) -> list[tuple[str, str, str]]:
    out = []
    for term in (t for t in text.split(",") if t):
        m = re.fullmatch(r"([^=!]+)(==|=|!=)(.*)", term)
        assert m, f"field selector term {term!r}"
        out.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
    return out


def fields_match(selector: list[tuple[str, str, str]], obj: dict[str, Any]) -> bool:
    for path, op, value in selector:
        have: Any = obj
        for part in path.split("."):
            have = have.get(part) if isinstance(have, dict) else None
        if (have == value) != (op == "="):
            return False
    return True


# -- objects in the renderer's shape (kube/manifests.py), made by hand ------------------------------------
def model_objects(
    alias: str,
    spec: dict[str, Any] | None = None,
    digest: str = "sha256:1",
    project: str = "lab",
    namespace: str = "lab",
    image: str = "vllm/vllm-openai:v0.31.0",
    strategy: str = "Recreate",
    env_secret: str | None = None,
    download: bool = False,
) -> list[dict[str, Any]]:
    """One model's objects: [Secret,] [PVC, Job,] Service, Deployment, annotated as the renderer does
    (the Docker labels of desired/labels.py as annotations; the spec hash on the Deployment)."""
    from aigo_apply.config import kube_names as names
    from aigo_apply.desired import labels as L
    from aigo_apply.desired.types import SecretRef
    from aigo_apply.kube.secrets import secret_object

    spec = spec if spec is not None else {"engine": "vllm", "context_length": 4096, "port": 8001}
    labels = names.labels(project, names.label_value(alias), "model")
    marks = {L.ROLE: L.ROLE_ENGINE, L.MODEL: alias, L.MANAGED_BY: L.MANAGER, L.PROJECT: project}
    name = names.model_name(project, alias)
    out: list[dict[str, Any]] = []
    if env_secret:
        out.append(
            secret_object(
                names.env_secret_name(project, alias), namespace, labels, {"API_KEY": SecretRef("from_env", env_secret)}
            )
        )
    if download:
        store = names.storage_name(project, alias, "weights")
        pod = {"restartPolicy": "Never", "containers": [{"name": "download", "image": image}]}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": store, "namespace": namespace, "labels": labels},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}},
            }
        )
        dl = names.labels(project, names.label_value(alias), "download")
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": store, "namespace": namespace, "labels": dl},
                "spec": {"backoffLimit": 4, "template": {"metadata": {"labels": dl}, "spec": pod}},
            }
        )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "http", "port": spec.get("port", 8001), "targetPort": "http"}],
            },
        }
    )
    container = {
        "name": "engine",
        "image": image,
        "args": ["/models/" + alias, "--served-model-name", alias, "--max-model-len", str(spec.get("context_length"))],
        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
    }
    out.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "annotations": {**marks, **L.for_engine(project, alias, spec.get("engine", "vllm"), spec, digest)},
            },
            "spec": {
                "replicas": 1,
                "strategy": {"type": strategy},
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        }
    )
    for obj in out:
        obj["metadata"].setdefault("annotations", {}).update(marks)
    return out


def router_objects(
    spec: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    digest: str = "sha256:r",
    project: str = "lab",
    namespace: str = "lab",
) -> list[dict[str, Any]]:
    """The router's ConfigMap, Service and Deployment (a rolling update with maxUnavailable 0)."""
    from aigo_apply.config import kube_names as names
    from aigo_apply.desired import labels as L

    spec = spec if spec is not None else {"port": 8000, "image": "haproxy:3.2"}
    files = files if files is not None else {"haproxy.cfg": "global\n", "models.json": '{"object": "list", "data": []}'}
    labels = names.labels(project, "router", "router")
    name = names.router_name(project)
    owner = {L.MANAGED_BY: L.MANAGER, L.PROJECT: project}
    meta = {"name": name, "namespace": namespace, "labels": labels, "annotations": {L.ROLE: L.ROLE_ROUTER, **owner}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**meta, "annotations": {L.ROLE: L.ROLE_ROUTER, **L.for_router(project, spec, digest)}},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "router", "image": spec.get("image")}]},
            },
        },
    }
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": copy.deepcopy(meta), "data": dict(files)},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": copy.deepcopy(meta),
            "spec": {
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "http", "port": spec.get("port", 8000), "targetPort": "http"}],
            },
        },
        deployment,
    ]


# -- what the apply-path tests share ----------------------------------------------------------------


class Reporter:
    """The apply path's reporter, keeping every event for the test to read."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def event(self, kind: str, **fields) -> None:
        self.events.append((kind, fields))


class Clock:
    """A clock the rollout and router waits read, advanced only by their own sleeps: waits are instant."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def router_keys(secret: dict) -> set[str]:
    """The "Bearer KEY" lines of the router's key Secret (its data, base64; or stringData)."""
    import base64

    text = (secret.get("stringData") or {}).get("api-keys")
    if text is None:
        raw = (secret.get("data") or {}).get("api-keys") or ""
        text = base64.b64decode(raw).decode("utf-8", "replace")
    return {line for line in str(text).splitlines() if line}
