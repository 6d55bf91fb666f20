"""Every JSON answer the SDK tests get from sbxd is checked against docs/openapi.yaml: the
route and method are described, the status is one the operation lists, the body validates
against its schema (JSON Schema 2020-12, python3-jsonschema), and an error's code is named
in that response's description. Installed as an httpx response hook (conftest.py), so a
drift between the document and the daemon fails the test that met it."""

import re

import jsonschema
import yaml


class OpenApiChecker:
    def __init__(self, doc_path):
        with open(doc_path) as f:
            self.doc = yaml.safe_load(f)
        self.resolver = jsonschema.RefResolver("", self.doc)
        self.routes = []
        for tmpl, item in self.doc["paths"].items():
            rx, literals = "", 0
            for seg in tmpl.strip("/").split("/"):
                m = re.fullmatch(r"\{(\w+)\}", seg)
                if m:
                    rx += "/.+" if m.group(1) == "path" else "/[^/]+"
                else:
                    rx += "/" + re.escape(seg)
                    literals += 1
            self.routes.append((re.compile("^" + rx + "$"), literals, tmpl, item))
        self.seen = set()

    def _ref(self, obj):
        while "$ref" in obj:
            target = self.doc
            for part in obj["$ref"].lstrip("#/").split("/"):
                target = target[part]
            extra = {k: v for k, v in obj.items() if k != "$ref"}
            obj = dict(target, **extra)
        return obj

    def route(self, path):
        hits = [(lit, tmpl, item) for rx, lit, tmpl, item in self.routes if rx.match(path)]
        if not hits:
            return None, None
        lit, tmpl, item = max(hits, key=lambda h: h[0])  # a literal beats a parameter
        return tmpl, item

    def __call__(self, response):
        req = response.request
        path = req.url.path
        tmpl, item = self.route(path)
        method = req.method.lower()
        assert tmpl is not None, "%s %s: no such path in docs/openapi.yaml" % (req.method, path)
        assert method in item, "%s %s: method not in docs/openapi.yaml" % (req.method, tmpl)
        where = "%s %s -> %d" % (req.method, tmpl, response.status_code)
        responses = item[method]["responses"]
        status = str(response.status_code)
        assert status in responses, "%s: status not documented (has %s)" % (
            where, sorted(responses))
        self.seen.add((req.method, tmpl, status))
        r = self._ref(responses[status])
        ctype = response.headers.get("content-type", "").split(";")[0].strip()
        if ctype != "application/json":
            return
        content = r.get("content") or {}
        assert "application/json" in content, "%s: answered JSON, documented %s" % (
            where, sorted(content))
        response.read()
        body = response.json()
        schema = content["application/json"].get("schema", {})
        try:
            jsonschema.Draft202012Validator(schema, resolver=self.resolver).validate(body)
        except jsonschema.ValidationError as e:
            raise AssertionError("%s: body does not match docs/openapi.yaml: %s at %s" % (
                where, e.message, "/".join(map(str, e.absolute_path)))) from None
        if response.status_code >= 400:
            code = body["error"]["code"]
            assert "`%s`" % code in r.get("description", ""), (
                "%s: error code %s is not named in the response's description (%r)" % (
                    where, code, r.get("description")))
