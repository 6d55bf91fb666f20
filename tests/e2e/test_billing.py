"""Metering, the daily exec limit, the wallet and settlement (docs/billing.md).

One daemon with a test clock (SBX_TEST_CLOCK_FILE: billing's "now" in unix seconds), a fast
meter tick, one free exec second a month and a price of 1 000 micro-EUR per exec ms, so an
exec of about a second gives charges the test can compute exactly from /v1/usage."""

import calendar
import os
import threading
import time

import harness
from harness import assert_error, wait_for

FREE_MS = 1000
PER_MS = 1000  # micro-EUR per exec ms: SBX_PRICE_EXEC_HOUR_MICRO_EUR = PER_MS * 3 600 000
DAILY_S = 3


def ts(text):
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


class Clock:
    def __init__(self, path):
        self.path = path

    def set(self, text):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % ts(text))
        os.rename(tmp, self.path)


_state = {}


def daemon():
    if "d" not in _state:
        tmp = harness.tempfile.mkdtemp(prefix="sbx-billing-")
        clock = Clock(os.path.join(tmp, "clock"))
        clock.set("2026-10-16T12:00:00")
        d = harness.Daemon(extra_env={
            "SBX_TEST_CLOCK_FILE": clock.path,
            "SBX_TEST_BILLING_TICK_MS": "100",
            "SBX_FREE_EXEC_SECONDS": str(FREE_MS // 1000),
            "SBX_PRICE_EXEC_HOUR_MICRO_EUR": str(PER_MS * 3600000),
            "SBX_DAILY_EXEC_SECONDS": str(DAILY_S),
            "SBX_DATA_REGION": "eu-test-1",
            # Volumes' own price (docs/volumes.md), high enough to charge a few MB.
            "SBX_PRICE_VOLUME_GB_MONTH_MICRO_EUR": str(10 ** 9),
        }).start()
        _state.update(d=d, clock=clock, tmp=tmp)
    return _state["d"]


def clock():
    daemon()
    return _state["clock"]


def teardown_module():
    d = _state.pop("d", None)
    if d:
        d.cleanup()


def member(name):
    key = "key:" + name
    if key not in _state:
        _state[key] = daemon().client().create_key(name, "member", "sandbox")["key"]
    return daemon().client(_state[key])


def usage_ms(user, frm, to):
    u = daemon().client().ok("GET", "/v1/usage?user=%s&from=%s&to=%s" % (user, frm, to))
    return u["total"]["exec_ms"], u


def charges(user):
    led = daemon().client().ok("GET", "/v1/wallet/ledger?user=" + user)["data"]
    return [e for e in led if e["source"] == "sandbox_charge"]


def test_nothing_before_the_billing_start_is_charged_or_uses_free_hours():
    c = member("early")
    sid = c.create_sandbox(backend="v1", ttl_seconds=3600)["id"]
    # October 16th, the day before SBX_BILLING_START (default 2026-10-17).
    c.sh(sid, "sleep 1.2")
    clock().set("2026-10-17T00:00:30")
    c.sh(sid, "sleep 1.2")
    oct17, _ = usage_ms("early", "2026-10-17", "2026-10-17")
    oct16, _ = usage_ms("early", "2026-10-16", "2026-10-16")
    assert oct16 >= 1200 and oct17 >= 1200, (oct16, oct17)
    clock().set("2026-10-17T00:10:30")
    wait_for(lambda: charges("early"), 10, what="the October 17th interval settled")
    ch = charges("early")
    # Only the 17th is charged, less the whole free second: the 16th did not use it up.
    assert len(ch) == 1 and ch[0]["amount_micro_eur"] == -(oct17 - FREE_MS) * PER_MS, (ch, oct17)
    assert ch[0]["interval"]["start_ms"] == ts("2026-10-17T00:00:00") * 1000, ch
    c.delete_sandbox(sid)


def test_settlement_free_tier_month_boundary_402_and_top_up():
    c = member("bill")
    admin = daemon().client()
    clock().set("2026-10-31T23:45:00")
    sb = c.create_sandbox(backend="v1", ttl_seconds=3600)
    sid = sb["id"]
    # October 31st, 23:45: one exec past the free second.
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "sleep 1.3"}, timeout=120)
    assert r.status == 200, r
    assert r.headers.get("x-sbx-cost-micro-usd") == "0", r.headers
    assert r.headers.get("x-sbx-data-region") == "eu-test-1", r.headers
    oct_ms, u = usage_ms("bill", "2026-10-01", "2026-10-31")
    assert oct_ms >= 1300, u
    assert u["keys"][0]["exec_ms"] == oct_ms and u["user"] == "bill", u
    assert charges("bill") == [], "nothing is settled before the interval ends"

    # Past midnight: the 23:40-23:50 interval is settled at October's free tier.
    clock().set("2026-11-01T00:00:30")
    wait_for(lambda: charges("bill"), 10, what="the October interval settled")
    ch = charges("bill")
    assert len(ch) == 1, ch
    want = (oct_ms - FREE_MS) * PER_MS
    assert ch[0]["amount_micro_eur"] == -want, (ch, oct_ms)
    assert ch[0]["interval"] == {"start_ms": ts("2026-10-31T23:40:00") * 1000,
                                 "end_ms": ts("2026-10-31T23:50:00") * 1000}, ch
    assert ch[0]["details"]["v1_exec_ms"] == oct_ms, ch

    # Unpaid: creates and execs answer 402 with the amount.
    w = c.ok("GET", "/v1/wallet")
    assert w["balance_micro_eur"] == -want and w["unpaid_micro_eur"] == want, w
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"})
    assert_error(r, 402, "insufficient_balance")
    assert r.body["error"]["unpaid_micro_eur"] == want, r.body
    r = c.request("POST", "/v1/sandboxes", {"backend": "v1"})
    assert_error(r, 402, "insufficient_balance")
    r = c.request("POST", "/v1/sandboxes/run", {"shell": "true"})
    assert_error(r, 402, "insufficient_balance")

    # A top-up settles it and execs run again.
    top = admin.ok("POST", "/v1/wallet/top-up", {"user": "bill",
                                                 "amount_micro_eur": want + 10_000_000,
                                                 "note": "invoice 1"})
    assert top["balance_micro_eur"] == 10_000_000 and top["unpaid_micro_eur"] == 0, top
    assert top["entry"]["source"] == "top_up" and top["entry"]["details"] == {"note": "invoice 1"}

    # November: the free tier starts again, so the first exec pays less its free second...
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "sleep 1.3"}, timeout=120)
    assert r.status == 200, r
    nov1, _ = usage_ms("bill", "2026-11-01", "2026-11-01")
    clock().set("2026-11-01T00:10:30")
    wait_for(lambda: len(charges("bill")) == 2, 10, what="the first November interval settled")
    ch = charges("bill")
    assert ch[0]["amount_micro_eur"] == -(nov1 - FREE_MS) * PER_MS, (ch, nov1)
    # ...and the second pays in full: the month's free part is used up.
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "sleep 0.2"}, timeout=120)
    assert r.status == 200, r
    nov_all, _ = usage_ms("bill", "2026-11-01", "2026-11-01")
    clock().set("2026-11-01T00:20:30")
    wait_for(lambda: len(charges("bill")) == 3, 10, what="the second November interval settled")
    ch = charges("bill")
    assert ch[0]["amount_micro_eur"] == -(nov_all - nov1) * PER_MS, (ch, nov_all, nov1)
    total = sum(e["amount_micro_eur"] for e in ch)
    w = c.ok("GET", "/v1/wallet")
    assert w["balance_micro_eur"] == want + 10_000_000 + total, (w, ch)
    _state["bill_wallet"] = w["balance_micro_eur"]
    _state["bill_ledger"] = admin.ok("GET", "/v1/wallet/ledger?user=bill")["data"]
    _state["bill_usage"] = nov_all


def test_ledger_pages_and_is_append_only():
    admin = daemon().client()
    admin.ok("POST", "/v1/wallet/top-up", {"user": "pager", "amount_micro_eur": 5})
    admin.ok("POST", "/v1/wallet/top-up", {"user": "pager", "amount_micro_eur": 7})
    admin.ok("POST", "/v1/wallet/top-up", {"user": "pager", "amount_micro_eur": -2,
                                           "source": "adjustment"})
    p1 = admin.ok("GET", "/v1/wallet/ledger?user=pager&limit=2")
    assert [e["amount_micro_eur"] for e in p1["data"]] == [-2, 7] and p1["has_more"], p1
    p2 = admin.ok("GET", "/v1/wallet/ledger?user=pager&limit=2&before=%d" % p1["next_before"])
    assert [e["amount_micro_eur"] for e in p2["data"]] == [5] and not p2["has_more"], p2
    assert p1["data"][0]["balance_after_micro_eur"] == 10, p1
    # The database itself refuses to change a ledger row.
    import sqlite3
    db = harness.store_db(daemon())
    try:
        db.execute("UPDATE wallet_ledger SET amount=0")
        raise AssertionError("a ledger row was updated")
    except (sqlite3.DatabaseError, RuntimeError) as e:
        assert "append-only" in str(e), e
    finally:
        db.close()


def test_wallet_bad_input():
    admin = daemon().client()
    m = member("nosy")
    for body in ({}, {"user": "x"}, {"user": "x", "amount_micro_eur": 0},
                 {"user": "x", "amount_micro_eur": -5}, {"user": "x", "amount_micro_eur": 1.5},
                 {"user": "", "amount_micro_eur": 5},
                 {"user": "x", "amount_micro_eur": 10 ** 13},
                 {"user": "x", "amount_micro_eur": 5, "source": "sandbox_charge"}):
        assert_error(admin.request("POST", "/v1/wallet/top-up", body), 400, "invalid_top_up")
    assert_error(admin.request("POST", "/v1/wallet/top-up", raw=b"{"), 400, "invalid_json")
    assert_error(m.request("POST", "/v1/wallet/top-up", {"user": "nosy", "amount_micro_eur": 5}),
                 403, "admin_required")
    assert m.ok("GET", "/v1/wallet")["balance_micro_eur"] == 0, "nothing was credited"
    assert_error(m.request("GET", "/v1/wallet?user=bill"), 403, "admin_required")
    assert_error(m.request("GET", "/v1/wallet/ledger?user=bill"), 403, "admin_required")
    assert_error(m.request("GET", "/v1/usage?user=bill"), 403, "admin_required")
    assert_error(m.request("GET", "/v1/wallet/ledger?limit=0"), 400, "invalid_request")
    assert_error(m.request("GET", "/v1/wallet/ledger?before=x"), 400, "invalid_cursor")
    assert_error(m.request("GET", "/v1/usage?from=yesterday"), 400, "invalid_usage_query")
    assert_error(m.request("GET", "/v1/usage?from=2026-11-02&to=2026-11-01"), 400,
                 "invalid_usage_query")
    assert_error(m.request("GET", "/v1/usage?from=2020-01-01&to=2026-11-01"), 400,
                 "invalid_usage_query")
    assert_error(m.request("GET", "/v1/wallet", key=None), 401, "missing_api_key")


def test_daily_limit_counts_running_execs():
    c = member("lim")
    clock().set("2026-11-03T08:00:00")
    sbs = [c.create_sandbox(ttl_seconds=3600)["id"] for _ in range(3)]
    results = {}

    def run(i, cmd):
        results[i] = c.request("POST", "/v1/sandboxes/%s/exec" % sbs[i], {"shell": cmd},
                               timeout=120)

    # A long exec runs past the limit; it is never cut.
    long_run = threading.Thread(target=run, args=(0, "touch /workspace/long; sleep %d; echo done"
                                                  % (DAILY_S + 4)))
    long_run.start()
    # While it runs (it said so), a second one is admitted: together they have used less
    # than the limit.
    wait_for(lambda: os.path.exists(os.path.join(daemon().sandbox_dir(sbs[0]), "workspace",
                                                 "long")), 60, what="the long exec to start")
    t1 = threading.Thread(target=run, args=(1, "sleep 1"))
    t1.start()
    t1.join()
    assert results[1].status == 200, results[1]
    # Once the running one has used the limit, nothing new starts, though none of its
    # seconds are in the store yet: the refusal comes while it still runs (what the store
    # holds, t1's second, is under the limit).
    wait_for(lambda: c.request("POST", "/v1/sandboxes/%s/exec" % sbs[2],
                               {"shell": "true"}).status == 429, DAILY_S + 30, 0.2,
             "the daily limit to refuse a new exec")
    assert long_run.is_alive(), "refused only once the long exec had ended"
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sbs[2], {"shell": "true"}), 429,
                 "sandbox_daily_limit")
    assert_error(c.request("POST", "/v1/sandboxes/%s/run_code" % sbs[2], {"code": "1"}), 429,
                 "sandbox_daily_limit")
    assert_error(c.request("POST", "/v1/sandboxes", {}), 429, "sandbox_daily_limit")
    long_run.join()
    r = results[0]
    assert r.status == 200 and r.body["exit_code"] == 0 and r.body["stdout"] == "done\n", r
    u = c.ok("GET", "/v1/usage")
    assert u["today"]["exec_seconds"] >= DAILY_S + 4, u
    assert u["today"]["daily_limit_seconds"] == DAILY_S, u
    # Other users are not limited by lim's usage, and the next UTC day starts afresh.
    assert member("other").request("POST", "/v1/sandboxes/run", {"shell": "true"},
                                   timeout=120).status == 200
    # The day's usage is settled at this module's steep price whenever the tick comes;
    # lim pays for it first, so that only the daily limit is under test here.
    daemon().client().ok("POST", "/v1/wallet/top-up", {"user": "lim",
                                                     "amount_micro_eur": 10 ** 12})
    clock().set("2026-11-04T00:00:05")
    assert c.exec(sbs[2], shell="echo again")["stdout"] == "again\n"
    for s in sbs:
        c.delete_sandbox(s)


def test_parallel_execs_are_metered_exactly():
    c = member("par")
    clock().set("2026-11-05T08:00:00")
    sbs = [c.create_sandbox(ttl_seconds=3600)["id"] for _ in range(3)]
    def run(i):
        c.exec(sbs[i], shell="sleep 0.5")

    ts_ = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in ts_:
        t.start()
    for t in ts_:
        t.join()
    u = c.ok("GET", "/v1/usage?from=2026-11-05&to=2026-11-05")
    assert u["total"]["exec_ms"] >= 1500, u
    # One row per exec, each covering its half second, all of them in the total.
    db = harness.store_db(daemon())
    try:
        rows = db.execute("SELECT sandbox_id, amount FROM usage_events WHERE \"user\"='par' "
                          "AND kind='exec_ms'").fetchall()
    finally:
        db.close()
    assert sorted(r[0] for r in rows) == sorted(sbs), rows
    assert all(r[1] >= 500 for r in rows) and sum(r[1] for r in rows) == u["total"]["exec_ms"]
    _state["par_ms"] = u["total"]["exec_ms"]
    for s in sbs:
        c.delete_sandbox(s)


def _metered_exec(user, at):
    """One exec of user's on the v1 backend (charged by exec time) at the clock's time at,
    past the month's free second (so it is charged), its sandbox gone before the clock
    moves."""
    clock().set(at)
    c = member(user)
    sid = c.create_sandbox(backend="v1", ttl_seconds=600)["id"]
    c.sh(sid, "sleep %.1f" % (FREE_MS / 1000 + 0.5))
    c.delete_sandbox(sid)


def test_counters_survive_kill9():
    # Usage and a settled charge of its own, whatever ran before.
    _metered_exec("k9", "2026-11-05T10:00:00")
    clock().set("2026-11-05T10:10:30")
    wait_for(lambda: charges("k9"), 10, what="k9's interval settled")
    d = daemon()
    admin = d.client()
    q = "/v1/usage?user=k9&from=2026-11-05&to=2026-11-05"
    before = admin.ok("GET", q)
    assert before["total"]["exec_ms"] >= FREE_MS + 500, before
    ledger = admin.ok("GET", "/v1/wallet/ledger?user=k9")["data"]
    wallet = admin.ok("GET", "/v1/wallet?user=k9")["balance_micro_eur"]
    d.restart(hard=True)
    admin = d.client()
    assert admin.ok("GET", q)["total"] == before["total"]
    assert admin.ok("GET", "/v1/wallet/ledger?user=k9")["data"] == ledger
    assert admin.ok("GET", "/v1/wallet?user=k9")["balance_micro_eur"] == wallet
    # The watermark survived too: time moving on charges nothing twice. A witness's later
    # interval settling shows a tick went past k9's.
    _metered_exec("k9-witness", "2026-11-05T10:50:00")
    clock().set("2026-11-05T11:00:30")
    wait_for(lambda: charges("k9-witness"), 10, what="the witness's interval settled")
    assert admin.ok("GET", "/v1/wallet/ledger?user=k9")["data"] == ledger


def usage_mark(d, key, kind):
    """Where the meter's count of kind for key (a sandbox's or a volume's id) stands (0: not
    started)."""
    db = harness.store_db(d)
    try:
        row = db.execute("SELECT upto_ms FROM usage_marks WHERE sandbox_id=? AND kind=?",
                         (key, kind)).fetchone()
    finally:
        db.close()
    return row[0] if row else 0


def settled_past(at):
    """Has a tick settled the billing interval that ends at `at` (the clock's text)? A tick
    meters before it settles, so one that did has metered at `at` or later."""
    w = daemon().client().ok("GET", "/v1/wallet?user=nobody")
    return w["settled_until_ms"] >= ts(at) * 1000


def test_v2_running_time_is_metered_by_the_clock():
    c = member("runner")
    clock().set("2026-11-06T10:00:00")
    sb = c.create_sandbox(ttl_seconds=3600)
    assert sb["backend"] == "v2", sb
    # Its running time is counted from the clock's 10:00: the meter's mark says so.
    assert wait_for(lambda: usage_mark(daemon(), sb["id"], "v2_running_ms"), 10,
                    what="the running time's mark") == ts("2026-11-06T10:00:00") * 1000
    clock().set("2026-11-06T10:25:00")
    wait_for(lambda: c.ok("GET", "/v1/usage")["total"]["v2_running_ms"] >= 25 * 60 * 1000, 10,
             what="25 minutes of running time metered")
    clock().set("2026-11-06T10:40:00")
    c.delete_sandbox(sb["id"])
    # From the moment it ran (the clock's 10:00) to its deletion at 10:40, exactly, and
    # nothing after.
    u = c.ok("GET", "/v1/usage")
    assert u["total"]["v2_running_ms"] == 40 * 60 * 1000, u
    clock().set("2026-11-06T11:00:00")
    # A tick at 11:00 or later has come and gone: still the same 40 minutes.
    wait_for(lambda: settled_past("2026-11-06T11:00:00"), 10, what="a tick at 11:00")
    assert c.ok("GET", "/v1/usage")["total"]["v2_running_ms"] == 40 * 60 * 1000


def test_run_code_cells_are_metered():
    c = member("coder")
    clock().set("2026-11-07T10:00:00")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    r = c.request("POST", "/v1/sandboxes/%s/run_code" % sid,
                  {"code": "import time\ntime.sleep(0.6)\n41 + 1"}, timeout=120)
    assert r.status == 200 and r.body["result"] == "42", r
    assert r.headers.get("x-sbx-cost-micro-usd") == "0", r.headers
    u = c.ok("GET", "/v1/usage?from=2026-11-07&to=2026-11-07")
    assert u["total"]["exec_ms"] >= 600, u
    c.delete_sandbox(sid)


def snapshot_bytes(d, sid):
    top = os.path.join(d.sandbox_dir(sid), "snapshots", "memory")
    total = 0
    for root, _, files in os.walk(top):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def test_paused_snapshot_is_metered_hourly_and_charged():
    d = daemon()
    c = member("sleeper")
    clock().set("2026-11-08T11:10:00")
    sid = c.create_sandbox(ttl_seconds=3600)["id"]
    r = c.request("POST", "/v1/sandboxes/%s/pause" % sid, timeout=120)
    assert r.status == 200 and r.body["status"] == "paused", r
    # A tick sees it paused at 11:10: its snapshot's hours are counted from 11:00 on.
    wait_for(lambda: usage_mark(d, sid, "snapshot_byte_hours"), 30,
             what="a tick to see the pause")
    assert c.ok("GET", "/v1/usage")["total"]["v2_running_ms"] == 0, "the clock did not move"
    clock().set("2026-11-08T13:30:00")
    wait_for(lambda: c.ok("GET", "/v1/usage")["total"]["snapshot_byte_hours"], 10,
             what="snapshot hours metered")
    size = snapshot_bytes(d, sid)
    assert size > 0, "no snapshot image on disk"
    u = c.ok("GET", "/v1/usage")
    # Two full hours sampled (12:00 and 13:00), none of it running time.
    assert u["total"]["snapshot_byte_hours"] == 2 * size, (u, size)
    assert u["total"]["v2_running_ms"] == 0, u
    clock().set("2026-11-08T13:40:30")
    want = 2 * size * 50000 // (10 ** 9 * 730)
    led = wait_for(lambda: [e for e in charges("sleeper")
                            if e["details"]["snapshot_byte_hours"]], 10,
                   what="the snapshot charge") if want else []
    if want:
        assert sum(e["details"]["snapshot_micro_eur"] for e in led) == want, (led, size)
    # Resumed at 14:00, it runs (and costs) from then on.
    clock().set("2026-11-08T14:00:00")
    r = c.request("POST", "/v1/sandboxes/%s/resume" % sid, timeout=120)
    assert r.status == 200 and r.body["status"] == "running", r
    clock().set("2026-11-08T14:30:00")
    c.delete_sandbox(sid)
    assert c.ok("GET", "/v1/usage")["total"]["v2_running_ms"] == 30 * 60 * 1000


def test_bad_billing_settings_stop_the_daemon_at_start():
    import subprocess
    for env, words in ((("SBX_BILLING_INTERVAL_SECONDS", "700"), "must divide 86400"),
                       (("SBX_BILLING_START", "17/10/2026"), "YYYY-MM-DD"),
                       (("SBX_DAILY_EXEC_SECONDS", "-1"), "SBX_DAILY_EXEC_SECONDS"),
                       (("SBX_PRICE_EXEC_HOUR_MICRO_EUR", "cheap"), "SBX_PRICE_EXEC_HOUR"),
                       (("SBX_LOG_FORMAT", "xml"), "text or json")):
        d = harness.Daemon(extra_env=dict([env]))
        try:
            p = subprocess.run([d.binary, "--listen", "127.0.0.1:%d" % d.port, "--data-dir",
                                d.data_dir], env=d.env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=30)
            assert p.returncode == 2 and words in p.stdout.decode(), (env, p)
        finally:
            d.cleanup()


def test_volume_storage_is_metered_hourly_at_its_own_price():
    daemon()
    c = member("archivist")
    clock().set("2026-11-20T11:10:00")
    v = c.ok("POST", "/v1/volumes", {"name": "ledger", "size_mb": 16}, status=201)
    r = c.request("PUT", "/v1/volumes/%s/files/blob" % v["id"], raw=os.urandom(4 << 20))
    assert r.status == 200, r
    # A tick sees it at 11:10: its hours are counted from 11:00 on.
    assert wait_for(lambda: usage_mark(daemon(), v["id"], "volume_byte_hours"), 10,
                    what="a tick to see the volume") == ts("2026-11-20T11:00:00") * 1000
    assert not c.ok("GET", "/v1/usage")["total"].get("volume_byte_hours")
    used = c.ok("GET", "/v1/volumes/" + v["id"])["used_bytes"]
    assert used >= 4 << 20, used
    clock().set("2026-11-20T13:30:00")
    wait_for(lambda: c.ok("GET", "/v1/usage")["total"].get("volume_byte_hours"), 10,
             what="volume hours metered")
    # Two full hours sampled (11:00-12:00 and 12:00-13:00) of what its files take.
    assert c.ok("GET", "/v1/usage")["total"]["volume_byte_hours"] == 2 * used
    clock().set("2026-11-20T13:40:30")
    want = 2 * used * 10 ** 9 // (10 ** 9 * 730)
    # The two samples fall in two billing intervals: both charged.
    led = wait_for(lambda: [e for e in charges("archivist")
                            if e["details"].get("volume_byte_hours")], 10,
                   what="the volume charge")
    wait_for(lambda: sum(e["details"].get("volume_byte_hours", 0)
                         for e in charges("archivist")) == 2 * used, 10,
             what="both volume hours charged")
    led = [e for e in charges("archivist") if e["details"].get("volume_byte_hours")]
    assert sum(e["details"]["volume_micro_eur"] for e in led) == want, (led, used)
    c.ok("DELETE", "/v1/volumes/" + v["id"])
