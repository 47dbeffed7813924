"""Executes Jolokia requests (already authenticated) against the lab broker's MBeans and builds the JSON
responses with Jolokia's shapes: `{"request": echo, "value": v, "status": 200}` or
`{"request": echo, "error_type": cls, "error": "cls : msg", "status": n}`."""

from __future__ import annotations

import logging
from typing import Any

from artemis_lab import versions
from artemis_lab.errors import LabArtemisError
from artemis_lab.jolokia import objectname
from artemis_lab.jolokia.requests import KNOWN_TYPES, ArgumentError, UnknownType, convert
from artemis_lab.mbeans import DOMAIN, ManagementModel, MBean

LOG = logging.getLogger("artemis_lab.jolokia")
AGENT_VERSION = "2.3.0"
PROTOCOL_VERSION = "8.0"
MBEAN_DESC = "Information on the management interface of the MBean"


class JolokiaError(Exception):
    def __init__(self, status: int, java_class: str, message: str):
        super().__init__(message)
        self.status = status
        self.java_class = java_class
        self.message = message


def _not_found(name: str) -> JolokiaError:
    return JolokiaError(404, "javax.management.InstanceNotFoundException", name)


def _illegal(message: str) -> JolokiaError:
    return JolokiaError(400, "java.lang.IllegalArgumentException", message)


class RequestHandler:
    def __init__(self, model: ManagementModel, agent_url: str, policy_location: str):
        self.model = model
        self.agent_url = agent_url
        self.policy_location = policy_location
        self.agent_id = f"{abs(hash(model.config.instance_dir)) % (1 << 32):08x}-lab"

    # --- entry ------------------------------------------------------------------------------------------------------
    def handle(self, req: Any, roles: frozenset[str]) -> dict[str, Any]:
        if not isinstance(req, dict):
            return self._error(None, JolokiaError(400, "java.lang.IllegalArgumentException",
                                                  "Invalid JSON request: expected a JSON object"))
        kind = req.get("type")
        if kind not in KNOWN_TYPES:
            raise UnknownType(str(kind).lower() if kind is not None else "null")
        echo = self._echo(req)
        try:
            value = getattr(self, f"_{kind}")(req, roles)
        except JolokiaError as exc:
            return self._error(echo, exc)
        except LabArtemisError as exc:
            return self._error(echo, JolokiaError(exc.jolokia_status, exc.java_class, exc.message))
        except Exception as exc:  # a bug in the lab must still answer like Jolokia does
            LOG.exception("Jolokia request failed: %s", req)
            return self._error(echo, JolokiaError(500, "java.lang.RuntimeException", str(exc)))
        return {"request": echo, "value": value, "status": 200}

    @staticmethod
    def _error(echo: dict[str, Any] | None, exc: JolokiaError) -> dict[str, Any]:
        body: dict[str, Any] = {} if echo is None else {"request": echo}
        body.update({"error_type": exc.java_class, "error": f"{exc.java_class} : {exc.message}",
                     "status": exc.status})
        return body

    @staticmethod
    def _echo(req: dict[str, Any]) -> dict[str, Any]:
        echo: dict[str, Any] = {}
        if "mbean" in req:
            try:
                echo["mbean"] = objectname.parse(str(req["mbean"])).canonical
            except objectname.MalformedObjectName:
                echo["mbean"] = req["mbean"]
        attr = req.get("attribute")
        if attr is not None:
            echo["attribute"] = attr[0] if isinstance(attr, list) and len(attr) == 1 else attr
        for key in ("path", "value"):
            if key in req and req[key] is not None:
                echo[key] = req[key]
        if req.get("arguments"):
            echo["arguments"] = req["arguments"]
        echo["type"] = req["type"]
        if "operation" in req:
            echo["operation"] = req["operation"]
        return echo

    # --- helpers ----------------------------------------------------------------------------------------------------
    def _name(self, req: dict[str, Any]) -> objectname.ObjectName:
        text = req.get("mbean")
        if not text:
            raise _illegal("No MBean name given")
        try:
            return objectname.parse(str(text))
        except objectname.MalformedObjectName as exc:
            raise JolokiaError(400, "javax.management.MalformedObjectNameException", str(exc)) from exc

    def _mbean(self, req: dict[str, Any]) -> MBean:
        name = self._name(req)
        bean = self.model.find(name)
        if bean is None:
            raise _not_found(str(req["mbean"]))
        return bean

    def _authorize(self, roles: frozenset[str], what: str) -> None:
        if not roles & self.model.config.management_roles:
            raise JolokiaError(403, "java.lang.Exception", f"User not authorized to access {what}")

    def _matching(self, pattern: objectname.ObjectName) -> list[MBean]:
        return [b for b in self.model.all() if pattern.matches(b.name)]

    @staticmethod
    def _navigate(value: Any, path: str | None) -> Any:
        if not path:
            return value
        for part in [p for p in path.split("/") if p]:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise JolokiaError(400, "java.lang.IllegalArgumentException", f"Invalid path '{path}'")
        return value

    @staticmethod
    def _attr_names(req: dict[str, Any]) -> list[str] | None:
        attr = req.get("attribute")
        if attr is None or attr == []:
            return None
        return attr if isinstance(attr, list) else [attr]

    # --- read -------------------------------------------------------------------------------------------------------
    def _read_one(self, bean: MBean, names: list[str] | None, single: bool, roles: frozenset[str]) -> Any:
        if names is None:
            self._authorize(roles, f"attribute: {next(iter(bean.attributes), '')}")
            values = {}
            for key, attr in bean.attributes.items():
                try:
                    values[key] = attr.get()
                except LabArtemisError:
                    continue  # Jolokia skips attributes whose getter throws in a read-all
            return values
        for n in names:
            if n not in bean.attributes:
                raise JolokiaError(404, "javax.management.AttributeNotFoundException", f"No such attribute: {n}")
        self._authorize(roles, f"attribute: {names[0]}")
        if single:
            return bean.attributes[names[0]].get()
        return {n: bean.attributes[n].get() for n in names}

    def _read(self, req: dict[str, Any], roles: frozenset[str]) -> Any:
        name = self._name(req)
        names = self._attr_names(req)
        single = isinstance(req.get("attribute"), str)
        if not name.is_pattern:
            bean = self.model.find(name)
            if bean is None:
                raise _not_found(str(req["mbean"]))
            return self._navigate(self._read_one(bean, names, single, roles), req.get("path"))
        beans = self._matching(name)
        if not beans:
            raise _not_found(f"No MBean with pattern {name.canonical} found for reading attributes")
        self._authorize(roles, f"attribute: {names[0] if names else 'pattern'}")
        result: dict[str, Any] = {}
        for bean in beans:
            wanted = names if names is None else [n for n in names if n in bean.attributes]
            if wanted == []:
                continue
            try:
                result[bean.name.canonical] = self._read_one(bean, wanted, False, roles)
            except LabArtemisError:
                continue  # MBean vanished while reading
        if not result:
            raise _illegal(f"No matching attributes {names} found on MBeans "
                           f"[{', '.join(b.name.canonical for b in beans)}]")
        return result

    # --- write ------------------------------------------------------------------------------------------------------
    def _write(self, req: dict[str, Any], roles: frozenset[str]) -> Any:
        bean = self._mbean(req)
        attr_name = req.get("attribute")
        attr = bean.attributes.get(str(attr_name))
        if attr is None:
            raise JolokiaError(404, "javax.management.AttributeNotFoundException", f"No such attribute: {attr_name}")
        self._authorize(roles, f"attribute: {attr_name}")
        if attr.set is None:
            raise JolokiaError(404, "javax.management.AttributeNotFoundException",
                               f"Attribute {attr_name} is read-only")
        try:
            new = convert(req.get("value"), attr.type)
        except ArgumentError as exc:
            raise JolokiaError(400, exc.java_class, exc.message) from exc
        old = attr.get()
        attr.set(new)
        return old

    # --- exec -------------------------------------------------------------------------------------------------------
    def _exec(self, req: dict[str, Any], roles: frozenset[str]) -> Any:
        bean = self._mbean(req)
        op_text = str(req.get("operation") or "")
        args = req.get("arguments") or []
        if not isinstance(args, list):
            args = [args]
        name, _, sig_text = op_text.partition("(")
        candidates = bean.ops_named(name)
        canonical = bean.name.canonical
        if not candidates:
            raise _illegal(f"No operation {name} found on MBean {canonical}")
        if sig_text:
            sig = tuple(t.strip() for t in sig_text.rstrip(")").split(",") if t.strip())
            matching = [op for op in candidates if op.signature == sig]
            if not matching:
                raise _illegal(f"No operation {op_text} on MBean {canonical} exists. Known signatures: "
                               + ",".join("(" + ",".join(op.signature) + ")" for op in candidates))
            op = matching[0]
        elif len(candidates) > 1:
            sigs = ",".join("(" + ",".join(op.signature) + ")" for op in candidates)[1:]
            raise _illegal(f"Operation {name} on MBean {canonical} is overloaded. Signatures found: {sigs}. "
                           "Use a signature when specifying the operation.")
        else:
            op = candidates[0]
        if len(args) != len(op.args):
            raise _illegal(f"Invalid number of operation arguments. Operation {op_text} on {canonical} requires "
                           f"{len(op.args)} parameters, not {len(args)} as given")
        self._authorize(roles, f"operation: {name}")
        try:
            converted = [convert(v, a[1]) for v, a in zip(args, op.args, strict=True)]
        except ArgumentError as exc:
            raise JolokiaError(400, exc.java_class, exc.message) from exc
        result = op.fn(*converted)
        return None if op.ret == "void" else result

    # --- search / list / version ------------------------------------------------------------------------------------
    def _search(self, req: dict[str, Any], _roles: frozenset[str]) -> Any:
        pattern = self._name(req)
        return [b.name.canonical for b in self._matching(pattern)]

    @staticmethod
    def _describe(bean: MBean) -> dict[str, Any]:
        ops: dict[str, Any] = {}
        for op in bean.operations:
            entry = {"args": [{"name": n, "type": t, "desc": d} for n, t, d in op.args], "ret": op.ret,
                     "desc": op.desc}
            if op.name in ops:
                prev = ops[op.name]
                ops[op.name] = [*prev, entry] if isinstance(prev, list) else [prev, entry]
            else:
                ops[op.name] = entry
        attrs = {n: {"rw": a.set is not None, "type": a.type, "desc": a.desc} for n, a in bean.attributes.items()}
        return {"op": ops, "attr": attrs, "class": bean.class_name, "desc": MBEAN_DESC}

    @staticmethod
    def _truncate(value: Any, depth: int, max_depth: int) -> Any:
        if not isinstance(value, dict):
            return value
        if max_depth and depth >= max_depth:
            return "1"
        return {k: RequestHandler._truncate(v, depth + 1, max_depth) for k, v in value.items()}

    def _list(self, req: dict[str, Any], _roles: frozenset[str]) -> Any:
        from artemis_lab.jolokia.requests import split_path

        tree: dict[str, Any] = {DOMAIN: {}}
        for bean in self.model.all():
            tree[DOMAIN][bean.name.canonical.split(":", 1)[1]] = self._describe(bean)
        node: Any = tree
        for part in [p for p in split_path(str(req.get("path") or "")) if p]:
            if not isinstance(node, dict) or part not in node:
                if isinstance(node, dict) and node is tree.get(DOMAIN):
                    try:
                        canonical = objectname.parse(f"{DOMAIN}:{part}").canonical.split(":", 1)[1]
                    except objectname.MalformedObjectName:
                        canonical = part
                    if canonical in node:
                        node = node[canonical]
                        continue
                raise _illegal(f"Invalid path provided: {req.get('path')}")
            node = node[part]
        config = req.get("config") or {}
        try:
            max_depth = int(config.get("maxDepth", 0) or 0)
        except (TypeError, ValueError):
            max_depth = 0
        return self._truncate(node, 0, max_depth)

    def _version(self, _req: dict[str, Any], _roles: frozenset[str]) -> Any:
        cfg = self.model.config
        return {
            "agent": AGENT_VERSION,
            "protocol": PROTOCOL_VERSION,
            "details": {
                "agent_version": AGENT_VERSION,
                "agent_id": self.agent_id,
                "server_product": "lab-artemis",
                "server_vendor": "continuity.artemis lab (emulating Artemis)",
                "server_version": f"{cfg.emulated_version}{versions.LAB_SUFFIX}",
                "secured": True,
                "url": self.agent_url,
            },
            "id": self.agent_id,
            "config": {
                "maxDepth": "15", "authMode": "jaas", "discoveryEnabled": "false", "maxCollectionSize": "0",
                "agentId": self.agent_id, "debug": "false", "policyLocation": self.policy_location,
                "agentContext": "/console/jolokia", "historyMaxEntries": "10", "realm": "activemq",
                "maxObjects": "0", "debugMaxEntries": "100",
            },
            "info": {"jmx": {}},
        }
