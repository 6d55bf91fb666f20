"""Idempotency-Key on sandbox creation, exec and run."""

import threading
import time

import harness
from harness import assert_error, wait_for

D = harness.Shared()


def teardown_module():
    D.close()


client = D.client


def sandbox():
    return D.once("sb", lambda d: d.client().create_sandbox())["id"]


COUNT = "echo x >> /workspace/counter; wc -l < /workspace/counter"


def test_replay_returns_the_saved_answer_with_one_side_effect():
    c, sid = client(), sandbox()
    h = {"Idempotency-Key": "count-1"}
    r1 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": COUNT}, headers=h)
    r2 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": COUNT}, headers=h)
    assert r1.status == r2.status == 200
    assert r1.body == r2.body, (r1.body, r2.body)
    assert r2.headers.get("x-sbx-idempotent-replay") == "true"
    assert "x-sbx-idempotent-replay" not in r1.headers
    assert c.sh(sid, "wc -l < /workspace/counter") == "1\n"


def test_replay_as_a_stream():
    c, sid = client(), sandbox()
    h = {"Idempotency-Key": "stream-1"}
    first = c.exec(sid, shell="echo streamed", **{})  # unrelated, keeps the sandbox warm
    assert first["exit_code"] == 0
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo once"}, headers=h)
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo once"}, headers=h)
    head = next(gen)
    events = [e for _, e in gen]
    assert head.headers.get("x-sbx-idempotent-replay") == "true"
    assert [e["type"] for e in events] == ["start", "stdout", "exit"], events
    assert events[0]["exec_id"] == r.body["id"] and events[1]["data"] == "once\n"


def test_different_body_is_a_mismatch():
    c, sid = client(), sandbox()
    h = {"Idempotency-Key": "mismatch-1"}
    assert c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}, headers=h).status == 200
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "false"}, headers=h),
                 409, "idempotency_key_mismatch")


def test_in_progress():
    c, sid = client(), sandbox()
    h = {"Idempotency-Key": "slow-1"}
    body = {"shell": "touch /workspace/slow.started; sleep 2; echo x >> /workspace/slow; "
                     "wc -l < /workspace/slow"}
    first = {}
    t = threading.Thread(target=lambda: first.update(
        r=c.request("POST", "/v1/sandboxes/%s/exec" % sid, body, headers=h)))
    t.start()
    # Under way for sure (a fixed sleep is not, on a loaded host); 2 s are left.
    wait_for(lambda: c.request("GET", "/v1/sandboxes/%s/files/slow.started" % sid).status == 200,
             60, 0.1, "the first exec to start")
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, body, headers=h), 409,
                 "idempotency_key_in_progress")
    t.join()
    assert first["r"].status == 200 and first["r"].body["stdout"] == "1\n"
    again = c.request("POST", "/v1/sandboxes/%s/exec" % sid, body, headers=h)
    assert again.body == first["r"].body


def test_keys_are_scoped_to_the_user():
    a, b = client("alice"), client("bob")
    h = {"Idempotency-Key": "same-key"}
    ra = a.request("POST", "/v1/sandboxes/run", {"shell": "echo alice"}, headers=h, timeout=120)
    rb = b.request("POST", "/v1/sandboxes/run", {"shell": "echo bob"}, headers=h, timeout=120)
    assert ra.status == rb.status == 200
    assert ra.body["stdout"] == "alice\n" and rb.body["stdout"] == "bob\n"
    assert "x-sbx-idempotent-replay" not in rb.headers


def test_sandbox_creation_replays_the_same_sandbox():
    c = client("carol")
    h = {"Idempotency-Key": "create-1"}
    r1 = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 600}, headers=h, timeout=120)
    r2 = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 600}, headers=h, timeout=120)
    assert r1.status == r2.status == 201 and r1.body["id"] == r2.body["id"]
    assert [s["id"] for s in c.list_sandboxes()] == [r1.body["id"]]
    c.delete_sandbox(r1.body["id"])


def test_bad_key_and_errors_are_not_saved_as_busy():
    c, sid = client(), sandbox()
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"},
                           headers={"Idempotency-Key": "x" * 300}), 400, "invalid_idempotency_key")
    h = {"Idempotency-Key": "validation-1"}
    r1 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true", "timeout_seconds": 0},
                   headers=h)
    r2 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true", "timeout_seconds": 0},
                   headers=h)
    assert_error(r1, 400, "invalid_timeout")
    assert r2.body == r1.body and r2.headers.get("x-sbx-idempotent-replay") == "true"


def test_saved_answers_survive_a_restart():
    d = D.get()
    c, sid = client(), sandbox()
    h = {"Idempotency-Key": "restart-1"}
    r1 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": COUNT}, headers=h)
    d.kill9()
    d.start()
    c = d.client()
    r2 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": COUNT}, headers=h)
    assert r2.body == r1.body and r2.headers.get("x-sbx-idempotent-replay") == "true"
