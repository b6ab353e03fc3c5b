#!/usr/bin/env python3
"""Crash durability: every write acknowledged with a 2xx survives SIGKILL of the server.

Concurrent writers create and update records over HTTP against a release server; the server is
killed with SIGKILL at a random moment, restarted, and every acknowledged write is read back.
A write in flight at the kill may or may not have landed, but nothing acknowledged may be lost
or changed. With --restart-postgres the database itself is restarted under load instead: while it
is down autoshop must answer 503 problem+json, and it must recover on its own.

Standard library only. Bounded: every loop has a count and a deadline; traffic goes to 127.0.0.1.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def request(base, key, method, path, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            payload = json.loads(raw or b"null")
        except ValueError:
            payload = raw.decode(errors="replace")
        return e.code, e.headers.get("Content-Type", ""), payload


class Server:
    def __init__(self, binary, database_url, workdir, extra_args=()):
        self.binary, self.database_url, self.workdir = binary, database_url, workdir
        self.extra_args = list(extra_args)
        self.proc = None
        self.base = None

    def start(self):
        port_file = os.path.join(self.workdir, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        log = open(os.path.join(self.workdir, "server.log"), "ab")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--database-url", self.database_url, "--listen", "127.0.0.1:0",
             "--port-file", port_file, "--rate-limit", "0", "--log", "warn", *self.extra_args],
            stdout=log, stderr=log)
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.base = "http://127.0.0.1:" + open(port_file).read().strip()
                try:
                    urllib.request.urlopen(self.base + "/healthz", timeout=2).read()
                    return
                except OSError:
                    pass
            if self.proc.poll() is not None:
                sys.exit(f"server exited with {self.proc.returncode}; see {self.workdir}/server.log")
            time.sleep(0.05)
        sys.exit("server did not start in 30 s")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


class Writer(threading.Thread):
    """Creates bays and updates its own bays; remembers what was acknowledged."""

    def __init__(self, n, server, key, shop_id, stop, deadline):
        super().__init__(daemon=True)
        self.n, self.server, self.key, self.shop_id = n, server, key, shop_id
        self.stop, self.deadline = stop, deadline
        self.acked = {}     # bay id -> (title, order) acknowledged
        self.pending = {}   # bay id -> (title, order) sent, outcome unknown
        self.seq = 0
        self.acks = 0
        self.statuses = {}

    def run(self):
        rng = random.Random(self.n)
        while not self.stop.is_set() and time.time() < self.deadline:
            self.seq += 1
            try:
                if self.acked and rng.random() < 0.5:
                    bay = rng.choice(list(self.acked))
                    title, _ = self.acked[bay]
                    want = (title, self.seq)
                    self.pending[bay] = want
                    status, _, body = request(self.server.base, self.key, "PUT", f"/api/v1/bays/{bay}",
                                              {"shop_id": self.shop_id, "title": title, "order": self.seq}, timeout=5)
                    if status == 200:
                        assert (body["title"], body["order"]) == want, body
                        self.acked[bay] = want
                        self.pending.pop(bay, None)
                        self.acks += 1
                else:
                    title = f"w{self.n}-{self.seq}-{rng.randrange(1 << 30)}"
                    status, _, body = request(self.server.base, self.key, "POST", "/api/v1/bays",
                                              {"shop_id": self.shop_id, "title": title, "order": self.seq}, timeout=5)
                    if status == 201:
                        self.acked[body["id"]] = (title, self.seq)
                        self.acks += 1
                self.statuses[status] = self.statuses.get(status, 0) + 1
            except (OSError, urllib.error.URLError):
                # The server is gone (killed): stop writing for this round.
                time.sleep(0.02)
                if self.server.proc.poll() is not None:
                    return


def verify(server, key, writers):
    checked = 0
    for w in writers:
        for bay, want in w.acked.items():
            status, _, body = request(server.base, key, "GET", f"/api/v1/bays/{bay}")
            got = (body.get("title"), body.get("order")) if status == 200 else None
            allowed = {want, w.pending.get(bay)}
            if got not in allowed:
                sys.exit(f"LOST WRITE: bay {bay}: acknowledged {want}, found {got} (status {status})")
            w.acked[bay] = got
            w.pending.pop(bay, None)
            checked += 1
    return checked


def bootstrap(binary, database_url, server):
    out = subprocess.run([binary, "company", "create", "--name", "Crash Test", "--database-url", database_url],
                         check=True, capture_output=True, text=True).stdout
    key = json.loads(out.strip().splitlines()[-1])["api_key"]
    server.start()
    status, _, body = request(server.base, key, "POST", "/api/v1/shops", {"name": "Crash shop"})
    assert status == 201, body
    return key, body["shop_id"]


def kill_rounds(args, server, key, shop_id):
    rng = random.Random(args.seed)
    writers = []
    for rnd in range(args.rounds):
        stop = threading.Event()
        deadline = time.time() + 10
        round_writers = [Writer(rnd * 100 + i, server, key, shop_id, stop, deadline) for i in range(args.writers)]
        # Carry each writer's records forward so updates keep hitting old rows too.
        for w, old in zip(round_writers, writers[-args.writers:] if writers else []):
            w.acked = dict(old.acked)
        for w in round_writers:
            w.start()
        time.sleep(rng.uniform(0.3, 1.5))
        server.kill()
        stop.set()
        for w in round_writers:
            w.join(timeout=15)
        server.start()
        checked = verify(server, key, round_writers)
        acks = sum(w.acks for w in round_writers)
        print(f"round {rnd + 1}: {acks} writes acknowledged before SIGKILL; {checked} records verified after restart")
        writers = round_writers
    server.stop()


def postgres_restart(args, server, key, shop_id):
    stop = threading.Event()
    deadline = time.time() + 60
    writers = [Writer(900 + i, server, key, shop_id, stop, deadline) for i in range(args.writers)]
    for w in writers:
        w.start()
    time.sleep(1.0)
    cluster = os.listdir("/etc/postgresql")[0]
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", cluster, "main", "stop", "-m", "fast"], check=True)
    down_statuses = {}
    for _ in range(20):
        status, ctype, body = request(server.base, key, "GET", "/api/v1/bays")
        down_statuses[status] = down_statuses.get(status, 0) + 1
        if status != 200 and not ctype.startswith("application/problem+json"):
            sys.exit(f"while PostgreSQL was down: status {status} with content type {ctype!r}")
        time.sleep(0.05)
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", cluster, "main", "start"], check=True)
    recovered = None
    for i in range(200):
        status, _, _ = request(server.base, key, "GET", "/api/v1/bays")
        if status == 200:
            recovered = i
            break
        time.sleep(0.1)
    time.sleep(1.0)
    stop.set()
    for w in writers:
        w.join(timeout=15)
    if recovered is None:
        sys.exit("autoshop did not recover within 20 s of PostgreSQL coming back")
    if down_statuses.get(503, 0) == 0:
        sys.exit(f"expected 503 while PostgreSQL was down, saw {down_statuses}")
    checked = verify(server, key, writers)
    statuses = {}
    for w in writers:
        for s, n in w.statuses.items():
            statuses[s] = statuses.get(s, 0) + n
    print(f"postgres restart: statuses while down {down_statuses}; writer statuses {statuses}; "
          f"recovered after {recovered * 0.1:.1f} s without restarting autoshop; {checked} records verified")
    server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default="target/release/autoshop")
    p.add_argument("--database-url", help="default: a fresh SQLite file")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--restart-postgres", action="store_true", help="restart the local PostgreSQL under load")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        url = args.database_url or f"sqlite://{work}/crash.db"
        server = Server(os.path.abspath(args.binary), url, work)
        key, shop_id = bootstrap(args.binary, url, server)
        try:
            if args.restart_postgres:
                postgres_restart(args, server, key, shop_id)
            else:
                kill_rounds(args, server, key, shop_id)
        finally:
            if server.proc and server.proc.poll() is None:
                server.proc.kill()
    print("durability: passed")


if __name__ == "__main__":
    main()
