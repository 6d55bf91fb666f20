"""bsl_check through a real sbxd and a real sandbox (docs/bsl.md): sbx-bsl is bind-mounted
read-only into the sandbox and run there through exec; a folder of modules in both keyword
languages is checked over REST (the tools route and /bsl/check) and over MCP, every planted
fault found at its line, nothing on the clean modules; bad arguments are refused with the
route's codes.
"""

import json
import os

import harness
from harness import assert_error

D = harness.Shared()

RU_FAULTY = """\
#Область ПрограммныйИнтерфейс

Функция Сумма(А, Б) Экспорт
\tЛишняя = 0;
\tВозврат А + Б;
КонецФункции

Процедура Обработать(Список)
\tДля Каждого Элемент Из Список Цикл
\t\tЗаписать(Список);
\tКонецЦикла;
\tПопытка
\t\tЗаписать(Список);
\tИсключение
\tКонецПопытки;
\tВозврат 1;
КонецПроцедуры

#КонецОбласти
"""
# line: UnusedLocalVariable 4, UseLessForEach 9, MissingCodeTryCatchEx 14, ProcedureReturnsValue 16

EN_FAULTY = """\
Function Total(A, B)
\tIf A > B Then
\t\tReturn A;
\tElsIf A < B Then
\t\tReturn B;
\tEndIf;
EndFunction

Procedure Run()
\tX = ?(Total(1, 2) > 1, ?(True, 1, 2), 3);
\tWrite(X)
EndProcedure
"""
# FunctionShouldHaveReturn 1, IfElseIfEndsWithElse 2, NestedTernaryOperator 10,
# SemicolonPresence 11

RU_CLEAN = """\
#Область СлужебныеПроцедурыИФункции

// Возвращает сумму двух чисел.
//
// Параметры:
//  А - Число - первое слагаемое.
//  Б - Число - второе слагаемое.
//
// Возвращаемое значение:
//  Число - сумма.
//
Функция Сложить(Знач А, Знач Б) Экспорт
\tРезультат = А + Б;
\tЕсли Результат > 100 Тогда
\t\tРезультат = 100;
\tИначеЕсли Результат < 0 Тогда
\t\tРезультат = 0;
\tИначе
\t\tРезультат = Окр(Результат, 2);
\tКонецЕсли;
\tТекст = "ВЫБРАТЬ
\t|\tПоле
\t|ИЗ Таблица";
\tЗапрос = Новый Запрос(Текст);
\tЗапрос.Выполнить();
\tВозврат Результат;
КонецФункции

#КонецОбласти
"""

EN_CLEAN = """\
Var Cache;

Procedure Fill(Items) Export
\tFor Each Item In Items Do
\t\tTry
\t\t\tCache.Insert(Item.Key, Item.Value);
\t\tExcept
\t\t\tRaise;
\t\tEndTry;
\tEndDo;
EndProcedure
"""

FAULTS = {
    "conf/CommonModules/Ru/Ext/Module.bsl": [
        ("UnusedLocalVariable", 4), ("UseLessForEach", 9), ("MissingCodeTryCatchEx", 14),
        ("ProcedureReturnsValue", 16)],
    "conf/scripts/main.os": [
        ("FunctionShouldHaveReturn", 1), ("IfElseIfEndsWithElse", 2),
        ("NestedTernaryOperator", 10), ("SemicolonPresence", 11)],
}
FILES = {
    "conf/CommonModules/Ru/Ext/Module.bsl": RU_FAULTY,
    "conf/scripts/main.os": EN_FAULTY,
    "conf/CommonModules/Clean/Ext/Module.bsl": RU_CLEAN,
    "conf/scripts/clean.os": EN_CLEAN,
    "conf/readme.txt": "not a module; Процедура",
}


def teardown_module():
    D.close()


def setup():
    def make(d):
        k = d.client().create_key("bsl")
        c = d.client(k["key"])
        sb = c.create_sandbox(ttl_seconds=1800)["id"]
        for path, text in FILES.items():
            r = c.request("POST", "/v1/sandboxes/%s/tools/sandbox_files" % sb,
                          {"op": "write", "path": path, "content": text})
            assert r.status == 200, r
        return k["key"], sb
    key, sb = D.once("setup", make)
    return D.get().client(key), sb


def found(report):
    """{path relative to /workspace: [(code, line), ...]} from a report."""
    out = {}
    for fi in report["fileinfos"]:
        rel = fi["path"].split("/workspace/", 1)[1]
        for g in fi["diagnostics"]:
            # bsl-language-server's range is 0-based; line/column are ours, 1-based
            assert g["line"] == g["range"]["start"]["line"] + 1
            assert g["column"] == g["range"]["start"]["character"] + 1
            assert g["severity"] in ("Error", "Warning", "Information", "Hint")
            assert g["source"] == "sbx-bsl" and g["message"]
            out.setdefault(rel, []).append((g["code"], g["line"]))
    return out


def check_report(report):
    got = found(report)
    for path, faults in FAULTS.items():
        for f in faults:
            assert f in got.get(path, []), "%s: %r not in %r" % (path, f, got.get(path))
    for path in ("conf/CommonModules/Clean/Ext/Module.bsl", "conf/scripts/clean.os"):
        assert path not in got, "clean module %s: %r" % (path, got[path])
    s = report["summary"]
    assert s["files"] == 4 and s["files_with_diagnostics"] == 2 and s["failed"] == 0
    assert s["diagnostics"] == sum(s["by_severity"].values()) == sum(s["by_code"].values())
    assert s["truncated"] is False


def test_rest_tool_on_a_folder():
    c, sb = setup()
    r = c.request("POST", "/v1/sandboxes/%s/tools/bsl_check" % sb, {"path": "conf"})
    assert r.status == 200, r
    assert r.body["tool"] == "bsl_check" and r.body["sandbox_id"] == sb
    check_report(r.body["result"])
    assert r.body["result"]["exec_id"]


def test_bsl_check_route_file_filter_and_bound():
    c, sb = setup()
    path = "/workspace/conf/CommonModules/Ru/Ext/Module.bsl"
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb,
                  {"path": path, "diagnostics": ["UseLessForEach", "ProcedureReturnsValue"]})
    assert r.status == 200, r
    got = found(r.body["result"])
    assert got == {"conf/CommonModules/Ru/Ext/Module.bsl":
                   [("UseLessForEach", 9), ("ProcedureReturnsValue", 16)]}
    for folder in ("conf/", "/workspace/conf/", "./conf"):
        r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb,
                      {"path": folder, "diagnostics": ["UseLessForEach"]})
        assert r.status == 200 and r.body["result"]["summary"]["diagnostics"] == 1, (folder, r)
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb, {"path": "conf", "max_results": 1})
    res = r.body["result"]
    assert sum(len(f["diagnostics"]) for f in res["fileinfos"]) == 1
    assert res["summary"]["truncated"] is True and res["summary"]["written"] == 1
    assert res["summary"]["diagnostics"] >= 8
    # bsl-language-server codes sbx-bsl lacks are named back, not refused
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb,
                  {"path": "conf", "diagnostics": ["MagicNumber", "EmptyCodeBlock"]})
    assert r.status == 200, r
    assert r.body["result"]["unsupported_diagnostics"] == ["MagicNumber"]
    assert r.body["result"]["summary"]["diagnostics"] == 0
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb,
                  {"path": "conf", "diagnostics": ["MagicNumber"]})
    assert r.status == 200 and r.body["result"]["summary"]["diagnostics"] == 0, r


def test_mcp_tools_call():
    c, sb = setup()
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}
    h = {"Accept": "application/json, text/event-stream"}
    r = c.request("POST", "/mcp", body=init, headers=h)
    assert r.status == 200, r
    h["Mcp-Session-Id"] = r.headers["mcp-session-id"]
    r = c.request("POST", "/mcp", body={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                  headers=h)
    tool = next(t for t in r.body["result"]["tools"] if t["name"] == "bsl_check")
    assert tool["inputSchema"]["required"] == ["sandbox_id", "path"]
    assert tool["annotations"]["readOnlyHint"] is True
    r = c.request("POST", "/mcp", headers=h,
                  body={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "bsl_check",
                                   "arguments": {"sandbox_id": sb, "path": "conf"}}})
    res = r.body["result"]
    assert res["isError"] is False, res
    check_report(res["structuredContent"])
    assert json.loads(res["content"][0]["text"])["summary"] == res["structuredContent"]["summary"]


def test_bad_arguments():
    c, sb = setup()
    url = "/v1/sandboxes/%s/tools/bsl_check" % sb
    assert_error(c.request("POST", url, {}), 400, "invalid_request")
    assert_error(c.request("POST", url, {"path": "../etc"}), 400, "invalid_path")
    assert_error(c.request("POST", url, {"path": "nope.bsl"}), 404, "file_not_found")
    assert_error(c.request("POST", url, {"path": "conf", "diagnostics": ["no such; code"]}),
                 400, "invalid_request")
    assert_error(c.request("POST", url, {"path": "conf", "diagnostics": "ParseError"}),
                 400, "invalid_request")
    assert_error(c.request("POST", url, {"path": "conf", "max_results": 0}), 400,
                 "invalid_request")
    assert_error(c.request("POST", url, {"path": "conf", "max_results": 2001}), 400,
                 "invalid_request")
    other = D.get().client(D.get().client().create_key("mallory")["key"])
    assert_error(other.request("POST", url, {"path": "conf"}), 404, "sandbox_not_found")
    # nothing was changed: the modules are as written
    r = c.request("POST", "/v1/sandboxes/%s/tools/sandbox_files" % sb,
                  {"op": "read", "path": "conf/scripts/main.os"})
    assert r.body["result"]["content"] == EN_FAULTY


def test_reviewer_modules_exactly():
    """tests/bsl/: every known fault at its line through the tool, and nothing else."""
    c, sb = setup()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bsl")
    want = set()
    for line in open(os.path.join(here, "expected.txt"), encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            f, code, ln = line.split()
            want.add((f, code, int(ln)))
    for name in os.listdir(here):
        if name.endswith((".bsl", ".os")):
            with open(os.path.join(here, name), encoding="utf-8") as fh:
                r = c.request("POST", "/v1/sandboxes/%s/tools/sandbox_files" % sb,
                              {"op": "write", "path": "review/" + name, "content": fh.read()})
            assert r.status == 200, r
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb, {"path": "review"})
    assert r.status == 200, r
    got = set()
    for fi in r.body["result"]["fileinfos"]:
        for g in fi["diagnostics"]:
            got.add((os.path.basename(fi["path"]), g["code"], g["line"]))
    assert got == want, "missing %r, extra %r" % (sorted(want - got), sorted(got - want))


def test_a_dump_of_thousands_of_modules():
    """A configuration dump's shape, 3 000 modules: all read, counted, the list bounded."""
    c, sb = setup()
    make = ("python3 -c \"\nimport os\nfor i in range(3000):\n"
            "    d = 'dump/CommonModules/M%04d/Ext' % i\n    os.makedirs(d)\n"
            "    open(d + '/Module.bsl', 'w').write('Процедура П()\\n\\tЛишняя = 1;\\n"
            "КонецПроцедуры\\n')\n\"")
    r = c.request("POST", "/v1/sandboxes/%s/tools/sandbox_bash" % sb, {"command": make})
    assert r.status == 200 and r.body["result"]["exit_code"] == 0, r
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sb,
                  {"path": "dump", "max_results": 10}, timeout=300)
    assert r.status == 200, r
    s = r.body["result"]["summary"]
    assert s["files"] == 3000 and s["diagnostics"] == 3000 and s["failed"] == 0, s
    assert s["by_code"] == {"UnusedLocalVariable": 3000} and s["truncated"] is True, s
    assert sum(len(f["diagnostics"]) for f in r.body["result"]["fileinfos"]) == 10
