#!/usr/bin/env python3
"""Imports are all or nothing across SIGKILL: a killed import leaves every row or none.

Each round imports a file of customers into a shop of its own and kills the server (SIGKILL)
at a random moment while the import may still be running, then starts it again. Afterwards the
shop must hold either every customer of the file, each with its `customer.created` event, or
none of them and no event; and when the client got its 201 before the kill, all of them. Some
rounds let the import finish, some kill it half-way: the script says how many of each.

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


def request(base, key, method, path, body=None, content_type="application/json", timeout=60):
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def csv_file(round_no, rows):
    lines = ["business_name,first_name,last_name,address,city,state,zip,customer_number,phone.home"]
    for i in range(rows):
        lines.append(f'"Fleet {i}, LLC",First{i},Last{i},{i} Main St,Town,IL,62701,R{round_no}-{i},555-{i:04d}')
    return ("\r\n".join(lines) + "\r\n").encode()


def count_events(base, key, shop_id):
    after, seen = None, 0
    while True:
        path = f"/api/v1/events?filter[shop_id]={shop_id}&filter[type]=customer.created&limit=1000"
        if after:
            path += f"&after={after}"
        status, page = request(base, key, "GET", path)
        assert status == 200, page
        seen += len(page["data"])
        if not page["data"] or not page.get("next_after"):
            return seen
        after = page["next_after"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/release/autoshop")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="autoshop-imports-") as work:
        url = args.database_url or f"sqlite://{work}/imports.db"
        out = subprocess.run([args.binary, "company", "create", "--name", "Import crash", "--database-url", url],
                             check=True, capture_output=True, text=True).stdout
        key = json.loads(out.strip().splitlines()[-1])["api_key"]
        server = Server(os.path.abspath(args.binary), url, work)
        server.start()
        outcomes = {"complete": 0, "none": 0}
        try:
            # How long one import takes here, to kill the others somewhere inside it.
            status, shop = request(server.base, key, "POST", "/api/v1/shops", {"name": "Timing"})
            assert status == 201, shop
            started = time.time()
            status, body = request(server.base, key, "POST", f"/api/v1/customers/import?shop_id={shop['shop_id']}",
                                   csv_file(0, args.rows), "text/csv")
            assert (status, body) == (201, {"created": args.rows, "updated": 0}), (status, body)
            took = time.time() - started
            print(f"imports: {args.rows} rows imported in {took:.2f} s")

            for round_no in range(1, args.rounds + 1):
                status, shop = request(server.base, key, "POST", "/api/v1/shops", {"name": f"Round {round_no}"})
                assert status == 201, shop
                shop_id = shop["shop_id"]
                answer = {}

                def send():
                    try:
                        answer["reply"] = request(server.base, key, "POST", f"/api/v1/customers/import?shop_id={shop_id}",
                                                  csv_file(round_no, args.rows), "text/csv")
                    except OSError as e:
                        answer["error"] = str(e)

                client = threading.Thread(target=send, daemon=True)
                client.start()
                time.sleep(rng.uniform(0.2 * took, 3.0 * took))
                server.kill()
                client.join(timeout=30)
                server.start()

                status, page = request(server.base, key, "GET", f"/api/v1/customers?filter[shop_id]={shop_id}&pageSize=1")
                assert status == 200, page
                stored = page["meta"]["total"]
                events = count_events(server.base, key, shop_id)
                acknowledged = answer.get("reply", (None,))[0] == 201
                if stored not in (0, args.rows):
                    sys.exit(f"round {round_no}: {stored} of {args.rows} customers stored: a partial import")
                if events != stored:
                    sys.exit(f"round {round_no}: {stored} customers stored with {events} customer.created events")
                if acknowledged and stored != args.rows:
                    sys.exit(f"round {round_no}: the import was answered 201 and then lost ({stored} stored)")
                outcomes["complete" if stored else "none"] += 1
            print(f"imports: {args.rounds} imports killed at random: {outcomes['complete']} complete, "
                  f"{outcomes['none']} left nothing, none partial; every stored customer has its event")
            server.stop()
        finally:
            if server.proc and server.proc.poll() is None:
                server.proc.kill()
    print("imports: passed")


if __name__ == "__main__":
    main()
