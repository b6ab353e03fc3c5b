#!/usr/bin/env python3
"""Safe retries survive SIGKILL: every keyed booking is written exactly once.

Booking clients create appointments with an Idempotency-Key each and, like a careful
integration, retry the same request with the same key on any network error, 409 or 5xx until
they get an answer. Meanwhile the server is killed with SIGKILL at random moments (between and
in the middle of requests) and started again. At the end every booking must exist exactly once
(no duplicate from a retry, no write lost after its answer), every answer a client got for
a key must name that one appointment, and the feed must hold exactly one `appointment.created`
for each stored appointment and none for any other (the event commits with its row, which on
PostgreSQL travels in the same statement).

Standard library only; traffic stays on 127.0.0.1.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from durability import Server  # noqa: E402


def keyed_post(base, key, path, body, idempotency_key, timeout=5):
    data = json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="POST")
    req.add_header("Authorization", f"Bearer {key}")
    req.add_header("Content-Type", "application/json")
    req.add_header("Idempotency-Key", idempotency_key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Idempotent-Replayed"), json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, None, e.read().decode(errors="replace")


def get(base, key, path):
    req = urllib.request.Request(base + path)
    req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def created_events(base, key, shop_id):
    """The appointment ids of the shop's `appointment.created` events, in feed order."""
    after, ids = None, []
    while True:
        path = f"/api/v1/events?filter[shop_id]={shop_id}&filter[type]=appointment.created&limit=1000"
        page = get(base, key, path + (f"&after={after}" if after else ""))
        ids += [e["data"]["appointment_id"] for e in page["data"]]
        if not page["data"] or not page.get("next_after"):
            return ids
        after = page["next_after"]


class Booker(threading.Thread):
    """Books appointments one after another, retrying each with its key until it is answered."""

    def __init__(self, n, server, key, shop_id, stop):
        super().__init__(daemon=True)
        self.n, self.server, self.key, self.shop_id, self.stop = n, server, key, shop_id, stop
        self.answers = {}  # last name -> [appointment ids answered, first and replays]
        self.retries = 0
        self.replays = 0
        self.error = None

    def run(self):
        rng = random.Random(self.n)
        seq = 0
        while not self.stop.is_set():
            seq += 1
            last_name = f"Crash{self.n}x{seq}"
            idem = f"booking-{self.n}-{seq}-{rng.randrange(1 << 40)}"
            body = {"shop_id": self.shop_id, "date": f"2031-0{1 + seq % 9}-1{seq % 10}T09:00:00Z", "year": "2020",
                    "make": "Honda", "model": "Civic", "home_phone": "", "work_phone": "", "cell_phone": "",
                    "first_name": "Retry", "last_name": last_name}
            answered = []
            # Two answers per key: the first, then a deliberate repeat that must replay it.
            while len(answered) < 2:
                try:
                    status, replayed, payload = keyed_post(self.server.base, self.key, "/api/v1/appointments", body, idem)
                except OSError:
                    status, replayed, payload = None, None, None
                if status == 201:
                    answered.append(payload["appointment_id"])
                    self.replays += replayed == "true"
                    continue
                if status is not None and status not in (409, 503) and status < 500:
                    self.error = f"{last_name}: unexpected {status}: {payload}"
                    return
                self.retries += 1
                time.sleep(0.05)
            self.answers[last_name] = answered


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default="target/release/autoshop")
    p.add_argument("--database-url", help="default: a fresh SQLite file")
    p.add_argument("--kills", type=int, default=4)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as work:
        url = args.database_url or f"sqlite://{work}/idempotency.db"
        out = subprocess.run([args.binary, "company", "create", "--name", "Retry crash", "--database-url", url],
                             check=True, capture_output=True, text=True).stdout
        key = json.loads(out.strip().splitlines()[-1])["api_key"]
        # A short request timeout keeps the lease of a key whose request died with the server
        # short, so retries get through soon after the restart.
        server = Server(os.path.abspath(args.binary), url, work, ["--request-timeout-secs", "2"])
        server.start()
        try:
            status, _, shop = keyed_post(server.base, key, "/api/v1/shops", {"name": "Retry shop"}, "shop-once")
            assert status == 201, shop
            stop = threading.Event()
            bookers = [Booker(n, server, key, shop["shop_id"], stop) for n in range(args.clients)]
            for b in bookers:
                b.start()
            for _ in range(args.kills):
                time.sleep(rng.uniform(0.5, 2.0))
                server.kill()
                time.sleep(rng.uniform(0.05, 0.5))
                server.start()
            time.sleep(1.0)
            stop.set()
            for b in bookers:
                b.join(timeout=60)
                if b.is_alive():
                    sys.exit(f"client {b.n} still retrying 60 s after the last restart")
                if b.error:
                    sys.exit(b.error)

            booked, stored_ids = 0, []
            for b in bookers:
                for last_name, ids in b.answers.items():
                    if len(set(ids)) != 1:
                        sys.exit(f"{last_name}: answers named different appointments {ids}")
                    found = get(server.base, key, f"/api/v1/appointments?filter[last_name]={last_name}&filter[trashed]=with&pageSize=10")
                    # The filter matches by prefix: keep the exact name.
                    stored = [a["appointment_id"] for a in found["data"] if a["last_name"] == last_name]
                    if stored != ids[:1]:
                        sys.exit(f"{last_name}: answered {ids[0]}, stored {stored} (duplicate or lost write)")
                    booked += 1
                    stored_ids += stored
            total = get(server.base, key, f"/api/v1/appointments?filter[shop_id]={shop['shop_id']}&filter[trashed]=with&pageSize=1")
            if total["meta"]["total"] != booked:
                sys.exit(f"{total['meta']['total']} appointments stored for {booked} bookings")
            # PostgreSQL shows an event once every older transaction has ended: wait for all.
            deadline = time.time() + 10
            while len(events := created_events(server.base, key, shop["shop_id"])) < booked and time.time() < deadline:
                time.sleep(0.1)
            if sorted(events) != sorted(stored_ids):
                missing, extra = set(stored_ids) - set(events), [i for i in events if events.count(i) > 1 or i not in stored_ids]
                sys.exit(f"events do not match the stored appointments: {len(events)} events for {booked}; "
                         f"without an event {sorted(missing)[:10]}, extra or repeated {sorted(set(extra))[:10]}")
            retries = sum(b.retries for b in bookers)
            replays = sum(b.replays for b in bookers)
            print(f"idempotency: {booked} bookings across {args.kills} SIGKILLs, {retries} retried requests, "
                  f"{replays} replayed answers; each stored exactly once, with exactly one event")
            server.stop()
        finally:
            if server.proc and server.proc.poll() is None:
                server.proc.kill()
    print("idempotency: passed")


if __name__ == "__main__":
    main()
