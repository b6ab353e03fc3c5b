#!/usr/bin/env python3
"""Webhook delivery survives SIGKILL: at-least-once, each webhook-id, after a restart.

A release server with a webhook to a local receiver takes concurrent writes while the receiver
refuses every delivery (503), so deliveries pile up pending with retries scheduled. The server
is killed with SIGKILL in the middle of it, the receiver starts accepting, and the server is
started again: every event of every acknowledged write (read back from the change feed) must
reach the receiver with a valid signature, at least once, within a deadline.

Standard library only; traffic stays on 127.0.0.1.
"""

import argparse
import base64
import hashlib
import hmac
import http.server
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from durability import Server, request  # noqa: E402


class Receiver(http.server.ThreadingHTTPServer):
    """Answers `status` to every delivery; records the webhook-ids delivered with a 2xx."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.status = 503
        self.secret = None
        self.lock = threading.Lock()
        self.accepted = {}  # webhook-id -> number of accepted deliveries
        self.refused = 0
        self.bad_signatures = 0

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        msg_id, ts, sig = (self.headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
        srv = self.server
        key = base64.b64decode(srv.secret.removeprefix("whsec_"))
        expected = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
        with srv.lock:
            status = srv.status
            if f"v1,{expected}" not in sig.split(" "):
                srv.bad_signatures += 1
            elif 200 <= status < 300:
                srv.accepted[msg_id] = srv.accepted.get(msg_id, 0) + 1
            else:
                srv.refused += 1
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def writes(server, key, shop_id, seconds, seed):
    """Creates bays from 4 threads for `seconds` (or until the server dies); returns the count."""
    acked = []
    stop = time.time() + seconds

    def run(n):
        rng = random.Random(seed * 10 + n)
        while time.time() < stop:
            try:
                status, _, body = request(server.base, key, "POST", "/api/v1/bays",
                                          {"shop_id": shop_id, "title": f"b{seed}-{n}-{rng.randrange(1 << 40)}"}, timeout=5)
                if status == 201:
                    acked.append(body["id"])
            except OSError:
                return

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    return threads, acked


def event_ids(server, key):
    ids, after = [], None
    for _ in range(1000):
        path = "/api/v1/events?filter[type]=bay.created&limit=1000" + (f"&after={after}" if after else "")
        status, _, body = request(server.base, key, "GET", path)
        assert status == 200, body
        ids += [(e["id"], e["data"]["id"]) for e in body["data"]]
        if not body["data"]:
            return ids
        after = body["next_after"]
    sys.exit("the feed did not end")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default="target/release/autoshop")
    p.add_argument("--database-url", help="default: a fresh SQLite file")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as work:
        url = args.database_url or f"sqlite://{work}/webhooks.db"
        out = subprocess.run([args.binary, "company", "create", "--name", "Webhook crash", "--database-url", url],
                             check=True, capture_output=True, text=True).stdout
        key = json.loads(out.strip().splitlines()[-1])["api_key"]
        server = Server(os.path.abspath(args.binary), url, work,
                        ["--webhook-allow-private", "--webhook-retry-schedule", ",".join(["0.5"] * 20)])
        server.start()
        try:
            status, _, shop = request(server.base, key, "POST", "/api/v1/shops", {"name": "Hook shop"})
            assert status == 201, shop
            status, _, hook = request(server.base, key, "POST", "/api/v1/webhooks", {"url": receiver.url, "events": ["bay.created"]})
            assert status == 201, hook
            receiver.secret = hook["secret"]
            acked = []
            for rnd in range(args.rounds):
                with receiver.lock:
                    receiver.status = 503
                threads, round_acked = writes(server, key, shop["shop_id"], 30, rnd)
                time.sleep(random.uniform(1.0, 2.0))
                server.kill()
                for t in threads:
                    t.join(timeout=10)
                acked += round_acked
                with receiver.lock:
                    receiver.status = 200
                server.start()
                events = event_ids(server, key)
                written = {bay for _, bay in events}
                missing_events = [b for b in acked if b not in written]
                if missing_events:
                    sys.exit(f"acknowledged bays without their event: {missing_events[:5]}")
                deadline = time.time() + 60
                while time.time() < deadline:
                    with receiver.lock:
                        undelivered = [e for e, _ in events if e not in receiver.accepted]
                    if not undelivered:
                        break
                    time.sleep(0.2)
                if undelivered:
                    sys.exit(f"round {rnd + 1}: {len(undelivered)} of {len(events)} events never delivered after the restart, e.g. {undelivered[:3]}")
                with receiver.lock:
                    repeats = sum(n - 1 for n in receiver.accepted.values())
                    refused, bad = receiver.refused, receiver.bad_signatures
                print(f"round {rnd + 1}: {len(round_acked)} writes acknowledged before SIGKILL; all {len(events)} events "
                      f"delivered after restart ({refused} refused attempts before, {repeats} accepted more than once)")
                if bad:
                    sys.exit(f"{bad} deliveries with a bad signature")
            server.stop()
        finally:
            if server.proc and server.proc.poll() is None:
                server.proc.kill()
            receiver.shutdown()
    print("webhooks: passed")


if __name__ == "__main__":
    main()
