#!/usr/bin/env python3
"""The scheduling board (GET /board) in a real browser: Debian's chromium driven by chromedriver.

Starts `autoshop serve --demo` on a fresh SQLite file, opens the board for the demo shop with the
most bays on a day the API says has appointments (today in the shop's zone when it has enough),
enters the demo key, and checks, with the browser in a time zone far from the shop's:

  - the blocks on screen are the API's appointments of that shop and day, each in its bay's lane
    and at its shop-local start time; the lanes are the bays in their `order` after "Unassigned";
  - dragging a block to another bay (real pointer input) saves it: the API shows the new bay and
    the same start; dragging it down an hour moves its start by exactly an hour;
  - an appointment changed through the API while a block is being dragged: the drop is refused
    with 412, the page says someone else changed it and shows the server's state;
  - changes made through the API (a move, a new unassigned appointment, a cancellation) appear on
    the page within two seconds;
  - the keyboard way (Enter on a block, the dialog's bay picker) saves too, for a block off the
    15-minute grid, and a sideways drag keeps such a block's start;
  - after the server restarts the stream resumes with Last-Event-ID; a page that had no event yet
    (no cursor) and lost its stream while a change was made reloads and shows it;
  - at 768 px wide the controls stay on screen and the lanes scroll sideways;
  - the key lives in sessionStorage only, and the browser logged no error.

Screenshots (1280x800 and 768 px wide) go to --screenshots. Fails loudly, never skips.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

BROWSER_TZ = "Asia/Kathmandu"  # +05:45: no shop of the demo is near it
LIVE_WITHIN = 2.0


def fail(message):
    raise AssertionError(message)


def step(message):
    print(f"board: ok - {message}", flush=True)


class Server:
    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, workdir
        self.proc = None

    def start(self):
        port_file = os.path.join(self.workdir, "port")
        self.stdout = os.path.join(self.workdir, "stdout")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--demo", "--database-url", f"sqlite://{self.workdir}/board.db", "--listen", "127.0.0.1:0",
             "--port-file", port_file, "--log", "warn"],
            stdout=open(self.stdout, "wb"), stderr=open(os.path.join(self.workdir, "stderr"), "wb"))
        deadline = time.time() + 60
        while time.time() < deadline:
            text = open(self.stdout).read()
            if "/board" in text and os.path.exists(port_file) and open(port_file).read().strip():
                self.base = "http://127.0.0.1:" + open(port_file).read().strip()
                self.key = next(w for w in text.split() if w.startswith("ask_"))
                if f"{self.base}/board" not in text:
                    fail(f"serve --demo does not print the board's address:\n{text}")
                return self
            if self.proc.poll() is not None:
                fail(f"the server exited with {self.proc.returncode}: {open(os.path.join(self.workdir, 'stderr')).read()}")
            time.sleep(0.05)
        fail("the server did not start within 60 s")

    def restart(self):
        """SIGKILL, then the same database on the same port (the page's stream must find its way back)."""
        port = self.base.rsplit(":", 1)[1]
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--database-url", f"sqlite://{self.workdir}/board.db", "--listen", f"127.0.0.1:{port}", "--log", "warn"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.workdir, "stderr"), "ab"))
        def up():
            try:
                return urllib.request.urlopen(self.base + "/healthz", timeout=1).status == 200
            except OSError:
                return False
        wait_for("the restarted server", up, within=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Api:
    def __init__(self, base, key):
        self.base, self.key = base, key

    def call(self, method, path, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.key}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
                return resp.status, resp.headers, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, e.headers, json.loads(raw) if raw else None

    def get(self, path):
        status, headers, body = self.call("GET", path)
        if status != 200:
            fail(f"GET {path}: {status} {body}")
        return body, headers

    def day(self, shop_id, date):
        items, page = [], 1
        while True:
            body, _ = self.get(f"/api/v1/appointments?filter%5Bshop_id%5D={shop_id}&filter%5Bdate%5D={date}&pageSize=100&page={page}")
            items += body["data"]
            if page >= body["meta"]["last_page"]:
                return items
            page += 1

    def appointment(self, id):
        body, headers = self.get(f"/api/v1/appointments/{id}")
        return body, headers["ETag"]

    def put(self, a, etag=None, **changes):
        body = put_body(a, **changes)
        status, _, answer = self.call("PUT", f"/api/v1/appointments/{a['appointment_id']}", body, {"If-Match": etag} if etag else None)
        if status != 200:
            fail(f"PUT appointment {a['appointment_id']}: {status} {answer}")
        return answer


def put_body(a, **changes):
    body = {
        "shop_id": a["shop_id"], "date": a["schedule"]["start"], "year": a["vehicle"]["year"], "make": a["vehicle"]["make"],
        "model": a["vehicle"]["model"], "home_phone": a["phone"]["home"], "work_phone": a["phone"]["work"],
        "cell_phone": a["phone"]["cell"], "customer_id": a["customer_id"], "vehicle_id": a["vehicle_id"],
        "repair_order_id": a["repair_order_id"], "employee_id": a["employee_id"], "first_name": a["first_name"],
        "last_name": a["last_name"], "email": a["email"], "reason": a["reason"], "status": a["status"], "hours": a["hours"],
        "source": a["source"], "done": a["done"], "column": a["column"],
    }
    body.update(changes)
    return body


def instant(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def wait_for(what, predicate, within=10.0, interval=0.05):
    deadline = time.time() + within
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    fail(f"timed out after {within} s waiting for {what} (last: {last!r})")


class Board:
    """The page, through the browser."""

    def __init__(self, driver):
        self.d = driver

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def blocks(self):
        return self.js("""return [...document.querySelectorAll('.appt')].map(b => ({id: +b.dataset.id, bay: b.dataset.bayId,
            lane: b.dataset.laneKey, start: b.dataset.start, done: b.dataset.done === 'true', text: b.textContent,
            label: b.getAttribute('aria-label'), saving: b.classList.contains('saving')}))""")

    def block(self, id):
        return next((b for b in self.blocks() if b["id"] == id), None)

    def lanes(self):
        return self.js("""return [...document.querySelectorAll('.lane')].map(l => ({key: l.dataset.laneKey, bay: l.dataset.bayId,
            title: l.dataset.title, droppable: l.dataset.droppable === 'true'}))""")

    def rect(self, selector):
        return self.js("const e = document.querySelector(arguments[0]); return e && e.getBoundingClientRect().toJSON();", selector)

    def viewport(self, width, height):
        self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def scroll_block_into_view(self, id):
        self.js("document.querySelector(`.appt[data-id='${arguments[0]}']`).scrollIntoView({block: 'center', inline: 'nearest'});", id)
        time.sleep(0.1)

    def drop_point(self, id, lane_key, minutes_delta=0):
        """Where to press on block `id`, and where to release it to land in `lane_key`, `minutes_delta` later."""
        return self.js("""
            const [id, laneKey, delta] = arguments;
            const block = document.querySelector(`.appt[data-id='${id}']`).getBoundingClientRect();
            const lane = document.querySelector(`.lane[data-lane-key='${laneKey}']`).getBoundingClientRect();
            const scroll = document.getElementById('scroll').getBoundingClientRect();
            const axis = document.querySelector('.axis').getBoundingClientRect();
            const left = Math.max(lane.left, axis.right) + 45, right = Math.min(lane.right, scroll.right) - 45;
            if (right <= left) return null;
            const x0 = Math.round(block.left + 12), y0 = Math.round(block.top + 6);
            return {x0, y0, x1: Math.round((left + right) / 2), y1: Math.round(y0 + delta * 1.6)};
        """, id, lane_key, minutes_delta)

    def press(self, x, y):
        actions = ActionBuilder(self.d, duration=50)
        actions.pointer_action.move_to_location(x, y).pointer_down().move_to_location(x + 8, y + 2).move_to_location(x + 16, y + 3)
        actions.perform()

    def release_at(self, x, y):
        actions = ActionBuilder(self.d, duration=100)
        actions.pointer_action.move_to_location(x - 10, y).move_to_location(x, y).pause(0.1).pointer_up()
        actions.perform()

    def drag(self, point):
        self.press(point["x0"], point["y0"])
        self.release_at(point["x1"], point["y1"])


def browser_errors(driver, what, allowed=(), expected=None):
    """Fails on an error the browser logged since the last call, but those `allowed`; with `expected`,
    fails unless one was logged."""
    log = driver.get_log("browser")
    if expected and not any(expected in entry["message"] for entry in log):
        fail(f"{what}: the browser saw no {expected!r}")
    errors = [e["message"] for e in log if e["level"] == "SEVERE" and not any(a in e["message"] for a in allowed)]
    if errors:
        fail(f"{what}: the browser logged errors:\n" + "\n".join(errors))


def expected_blocks(appointments, bay_ids):
    return {a["appointment_id"]: {"bay": "" if a["column"] is None else str(bay_ids[a["column"]]), "start": a["schedule"]["time"][:5],
                                  "done": a["done"]} for a in appointments}


def on_screen(board):
    return {b["id"]: {"bay": b["bay"], "start": b["start"], "done": b["done"]} for b in board.blocks()}


def choose_day(api, shop):
    """Today in the shop's zone when the API shows enough there (the demo fills two weeks each way), else the
    first day that has."""
    today = datetime.now(ZoneInfo(shop["timezone"])).date()
    for offset in [0] + [d for n in range(1, 15) for d in (n, -n)]:
        date = (today + timedelta(days=offset)).isoformat()
        items = api.day(shop["shop_id"], date)
        if len(items) >= 6 and len({a["column"] for a in items}) >= 3:
            return date, items
    fail(f"the demo data has no day with appointments in three bays of {shop['name']}")


def launch(chromium, chromedriver, profile):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,800", "--lang=en-US"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # The browser's zone is far from every shop's: the page must show shop time anyway.
    service = Service(executable_path=chromedriver, env={**os.environ, "TZ": BROWSER_TZ})
    return webdriver.Chrome(service=service, options=options)


def restart_and_move(server, driver, board, api, shop, day, bay):
    """Kills the server, waits for the page to notice, restarts it and moves an appointment shown
    in a bay lane into `bay` through the API; returns its id."""
    server.proc.kill()
    wait_for("the page to notice the server is gone", lambda: driver.find_element(By.ID, "live").get_attribute("data-state") == "connecting")
    server.restart()
    shown = {x["id"] for x in board.blocks() if x["lane"] != "unassigned"}
    moved = next(x for x in api.day(shop["shop_id"], day) if x["appointment_id"] in shown and x["column"] != bay["title"])
    api.put(api.appointment(moved["appointment_id"])[0], column=bay["title"])
    return moved["appointment_id"]


def run(server, driver, shots):
    api = Api(server.base, server.key)
    board = Board(driver)
    shops, _ = api.get("/api/v1/settings/shop_info?with=hours,bays")
    shop = max(shops["data"], key=lambda s: (sum(b["active"] for b in s["bays"]), -s["shop_id"]))
    bays = sorted((b for b in shop["bays"] if b["active"]), key=lambda b: (b["order"], b["title"].lower()))
    bay_ids = {b["title"]: b["id"] for b in shop["bays"]}
    date, appointments = choose_day(api, shop)
    tz = ZoneInfo(shop["timezone"])
    print(f"board: {shop['name']} ({shop['timezone']}), {date}: {len(appointments)} appointments; browser in {BROWSER_TZ}", flush=True)

    # The key prompt, then the day.
    board.viewport(1280, 800)
    driver.get(f"{server.base}/board#shop={shop['shop_id']}&date={date}")
    wait_for("the key prompt", lambda: driver.find_element(By.ID, "key").is_displayed())
    if board.js("return Intl.DateTimeFormat().resolvedOptions().timeZone") not in (BROWSER_TZ, "Asia/Katmandu"):
        fail("the browser does not run in the intended time zone")
    driver.find_element(By.ID, "key").send_keys("ask_" + "0" * 64, Keys.ENTER)
    wait_for("a refused key to be reported", lambda: "refused" in driver.find_element(By.ID, "key-error").text)
    if board.js("return sessionStorage.length"):
        fail("a refused key stayed in sessionStorage")
    driver.find_element(By.ID, "key").send_keys(server.key, Keys.ENTER)
    wait_for("the blocks of the day", lambda: len(board.blocks()) == len(appointments) and not board.js("return document.getElementById('board').ariaBusy"))
    wait_for("the live stream", lambda: driver.find_element(By.ID, "live").text == "Live")
    if board.js("return sessionStorage.getItem('autoshop.board.key')") != server.key:
        fail("the key is not in sessionStorage")
    if board.js("return localStorage.length") or board.js("return document.cookie"):
        fail("the key (or anything) was put in localStorage or a cookie")
    browser_errors(driver, "signing in", allowed=["status of 401"], expected="status of 401")
    step("the key prompt refuses a wrong key and takes the right one; it is kept in sessionStorage only")

    if on_screen(board) != expected_blocks(appointments, bay_ids):
        fail(f"the blocks differ from the API:\n page {on_screen(board)}\n api  {expected_blocks(appointments, bay_ids)}")
    lanes = board.lanes()
    if [l["title"] for l in lanes] != ["Unassigned"] + [b["title"] for b in bays]:
        fail(f"lanes {[l['title'] for l in lanes]} are not Unassigned + the bays in order {[b['title'] for b in bays]}")
    sample = appointments[len(appointments) // 2]
    text = board.block(sample["appointment_id"])["text"]
    for part in [sample["first_name"], sample["vehicle"]["make"], sample["reason"]]:
        if part and part not in text:
            fail(f"block {sample['appointment_id']} does not show {part!r}: {text!r}")
    if driver.find_element(By.ID, "shop").get_attribute("value") != str(shop["shop_id"]) or driver.find_element(By.ID, "date").get_attribute("value") != date:
        fail("the pickers do not show the shop and day")
    now = datetime.now(tz)
    if now.date().isoformat() == date and 9 <= now.hour < 16 and not board.rect("#now-line"):
        fail("no now-line on today's board")
    step(f"{len(appointments)} blocks match the API (ids, lanes, shop-local start times), lanes in bay order")

    # The day before (past: most of its appointments are done) and back, with the buttons.
    driver.find_element(By.ID, "prev-day").click()
    day_before = (datetime.fromisoformat(date) - timedelta(days=1)).date().isoformat()
    before_items = api.day(shop["shop_id"], day_before)
    wait_for("the day before", lambda: driver.find_element(By.ID, "date").get_attribute("value") == day_before
             and on_screen(board) == expected_blocks(before_items, bay_ids))
    done = [x for x in board.blocks() if x["done"]]
    if any(x["done"] for x in before_items) and not all("\u2713" in x["text"] and ", done," in x["label"] for x in done[:1]):
        fail(f"a done appointment does not show it: {done[:1]}")
    driver.find_element(By.ID, "next-day").click()
    wait_for("the day again", lambda: on_screen(board) == expected_blocks(appointments, bay_ids))
    step(f"the day buttons show the day before ({len(done)} of {len(before_items)} done, as in the API) and come back")

    path = os.path.join(shots, "board-1280x800.png")
    driver.save_screenshot(path)
    print(f"board: screenshot {path}", flush=True)

    # Drag a block to another bay, at the same time.
    by_id = {a["appointment_id"]: a for a in appointments}
    moves = []
    for a in sorted(appointments, key=lambda a: a["schedule"]["time"]):
        if a["column"] is None or not ("10:00" <= a["schedule"]["time"][:5] <= "13:00"):
            continue
        here = [l["key"] for l in lanes].index(f"bay:{bay_ids[a['column']]}")
        for neighbour in (here + 1, here - 1):
            if 1 <= neighbour < len(lanes) and lanes[neighbour]["droppable"]:
                moves.append((a, lanes[neighbour]))
    if not moves:
        fail("no appointment to drag")

    def drag_to_other_bay(exclude=()):
        for a, lane in moves:
            if a["appointment_id"] in exclude:
                continue
            board.scroll_block_into_view(a["appointment_id"])
            point = board.drop_point(a["appointment_id"], lane["key"])
            if point:
                return a, lane, point
        fail("no block has a neighbouring lane on screen to drop it in")

    a, lane, point = drag_to_other_bay()
    board.drag(point)
    moved = wait_for("the move in the API", lambda: (lambda x: x if x["column"] == lane["title"] else None)(api.appointment(a["appointment_id"])[0]))
    if moved["schedule"]["start"] != a["schedule"]["start"]:
        fail(f"the drag changed the start: {a['schedule']['start']} -> {moved['schedule']['start']}")
    wait_for("the block in its new lane", lambda: (board.block(a["appointment_id"]) or {}).get("bay") == lane["bay"]
             and not board.block(a["appointment_id"])["saving"])
    if "Saved" not in driver.find_element(By.ID, "notice").text:
        fail(f"no confirmation after the move: {driver.find_element(By.ID, 'notice').text!r}")
    step(f"dragging appointment {a['appointment_id']} from {a['column']} to {lane['title']} saved it (same start)")

    # Drag it an hour later (or earlier), in the same lane.
    delta = 60 if a["schedule"]["time"] < "13:00" else -60
    board.scroll_block_into_view(a["appointment_id"])
    point = board.drop_point(a["appointment_id"], lane["key"], delta)
    point["x1"] = point["x0"]
    board.drag(point)
    later = wait_for("the new time in the API", lambda: (lambda x: x if x["schedule"]["start"] != moved["schedule"]["start"] else None)(api.appointment(a["appointment_id"])[0]))
    shift = instant(later["schedule"]["start"]) - instant(moved["schedule"]["start"])
    if shift != timedelta(minutes=delta) or later["column"] != lane["title"]:
        fail(f"dragging {delta} minutes moved it by {shift} to {later['column']}")
    expected_start = (datetime.fromisoformat(f"{date}T{a['schedule']['time']}") + timedelta(minutes=delta)).strftime("%H:%M")
    if later["schedule"]["time"][:5] != expected_start:
        fail(f"shop-local start {later['schedule']['time']} is not {expected_start}")
    wait_for("the block at its new time", lambda: (board.block(a["appointment_id"]) or {}).get("start") == expected_start)
    step(f"dragging it {delta:+d} minutes moved its start by exactly that, in the shop's zone ({expected_start})")

    # Someone else changes an appointment while it is being dragged: 412, the message, the server's state.
    b, lane_b, point = drag_to_other_bay(exclude={a["appointment_id"]})
    fetches = f"return performance.getEntriesByName(new URL('/api/v1/appointments/{b['appointment_id']}', location.href).href).length"
    board.js("performance.setResourceTimingBufferSize(100000)")
    fetched = board.js(fetches)
    board.press(point["x0"], point["y0"])
    # The page fetches the ETag of what it shows when the drag starts.
    wait_for("the page to read the held appointment's ETag", lambda: board.js(fetches) > fetched)
    current, etag = api.appointment(b["appointment_id"])
    api.put(current, etag, reason="Changed elsewhere")
    time.sleep(1.2)  # the change reaches the page while the block is held
    board.release_at(point["x1"], point["y1"])
    alert = wait_for("the conflict message", lambda: driver.find_element(By.ID, "alert").text)
    if "Someone else changed this appointment" not in alert or driver.find_element(By.ID, "alert").get_attribute("data-status") != "412":
        fail(f"unexpected message after a conflicting drop: {alert!r} (status {driver.find_element(By.ID, 'alert').get_attribute('data-status')})")
    server_state = api.appointment(b["appointment_id"])[0]
    if server_state["column"] != b["column"] or server_state["reason"] != "Changed elsewhere":
        fail(f"the conflicting drop was written: {server_state['column']}, {server_state['reason']}")
    wait_for("the block showing the server's state", lambda: (lambda x: x and x["bay"] == str(bay_ids[b["column"]]) and "Changed elsewhere" in x["text"] and not x["saving"])(board.block(b["appointment_id"])))
    browser_errors(driver, "the conflicting drop", allowed=["status of 412"], expected="status of 412")
    path = os.path.join(shots, "board-1280x800-conflict.png")
    driver.save_screenshot(path)
    print(f"board: screenshot {path}", flush=True)
    step(f"a drop after someone else's change got 412: message shown, appointment {b['appointment_id']} shows the server's state")

    # Changes made through the API appear within two seconds.
    c = next(x for x in appointments if x["appointment_id"] not in (a["appointment_id"], b["appointment_id"]) and x["column"] is not None
             and x["schedule"]["time"] < "15:00")
    target = next(t for t in bays if t["title"] != c["column"])
    new_local = (datetime.fromisoformat(f"{date}T{c['schedule']['time']}") + timedelta(hours=1))
    started = time.time()
    api.put(api.appointment(c["appointment_id"])[0], date=new_local.strftime("%Y-%m-%dT%H:%M:%S"), column=target["title"])
    wait_for("the API's move on the page", lambda: (lambda x: x and x["bay"] == str(target["id"]) and x["start"] == new_local.strftime("%H:%M"))(board.block(c["appointment_id"])), within=LIVE_WITHIN)
    step(f"a move made through the API showed in {time.time() - started:.2f} s")

    started = time.time()
    status, _, created = api.call("POST", "/api/v1/appointments", {
        "shop_id": shop["shop_id"], "date": f"{date}T12:00:00", "year": "2021", "make": "Volvo", "model": "XC40",
        "home_phone": "", "work_phone": "", "cell_phone": "", "first_name": "Board", "last_name": "Test", "reason": "Walk-in", "hours": 1})
    if status != 201:
        fail(f"creating an appointment: {status} {created}")
    new_id = created["appointment_id"]
    wait_for("the new appointment in Unassigned", lambda: (lambda x: x and x["lane"] == "unassigned" and x["start"] == "12:00")(board.block(new_id)), within=LIVE_WITHIN)
    step(f"a new unassigned appointment showed in {time.time() - started:.2f} s")
    started = time.time()
    status, _, _ = api.call("DELETE", f"/api/v1/appointments/{new_id}")
    if status != 204:
        fail(f"cancelling: {status}")
    wait_for("the cancelled appointment to go", lambda: board.block(new_id) is None, within=LIVE_WITHIN)
    step(f"a cancelled appointment left the board in {time.time() - started:.2f} s")

    # Today, with an appointment made now (so the day's span covers the time whatever it is): the now-line.
    driver.find_element(By.ID, "today").click()
    now = datetime.now(tz)
    today = now.date().isoformat()
    wait_for("today's board", lambda: driver.find_element(By.ID, "date").get_attribute("value") == today
             and on_screen(board) == expected_blocks(api.day(shop["shop_id"], today), bay_ids), within=10)
    quarter = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    status, _, walk_in = api.call("POST", "/api/v1/appointments", {
        "shop_id": shop["shop_id"], "date": quarter.strftime("%Y-%m-%dT%H:%M:%S"), "year": "2020", "make": "Kia", "model": "Niro",
        "home_phone": "", "work_phone": "", "cell_phone": "", "first_name": "Now", "last_name": "Line", "hours": 0.25})
    if status != 201:
        fail(f"creating an appointment: {status} {walk_in}")
    wait_for("the appointment made now", lambda: board.block(walk_in["appointment_id"]), within=LIVE_WITHIN)
    line = wait_for("the now-line", lambda: board.js("const l = document.getElementById('now-line'); return l && +l.dataset.minutes"))
    local = datetime.now(tz)
    if abs(line - (local.hour * 60 + local.minute)) > 2:
        fail(f"the now-line is at minute {line} of the day, the shop's clock says {local:%H:%M}")
    api.call("DELETE", f"/api/v1/appointments/{walk_in['appointment_id']}")
    step(f"the Today button shows {today}; the now-line is at the shop's time ({local:%H:%M})")

    # The keyboard way: Enter on a block, choose a bay, save.
    shown = {x["id"] for x in board.blocks()}
    e = next(x for x in api.day(shop["shop_id"], today)
             if x["appointment_id"] in shown and x["appointment_id"] not in (a["appointment_id"], b["appointment_id"], c["appointment_id"]) and x["column"] is not None)
    e_target = next(t for t in bays if t["title"] != e["column"])
    # Off the 15-minute grid (and the time field's old 5-minute step): the editor must still save.
    off_grid = f"{e['schedule']['time'][:3]}07"
    e = api.put(api.appointment(e["appointment_id"])[0], date=f"{today}T{off_grid}:00")
    wait_for("the block off the grid", lambda: (board.block(e["appointment_id"]) or {}).get("start") == off_grid, within=LIVE_WITHIN)
    board.scroll_block_into_view(e["appointment_id"])
    driver.find_element(By.CSS_SELECTOR, f".appt[data-id='{e['appointment_id']}']").send_keys(Keys.ENTER)
    wait_for("the editor", lambda: driver.find_element(By.ID, "editor").is_displayed())
    if board.js("return document.activeElement.id") != "editor-bay":
        fail("the editor does not start on the bay picker")
    Select(driver.find_element(By.ID, "editor-bay")).select_by_visible_text(e_target["title"])
    driver.find_element(By.ID, "editor-save").send_keys(Keys.ENTER)
    wait_for("the keyboard move in the API", lambda: api.appointment(e["appointment_id"])[0]["column"] == e_target["title"])
    wait_for("focus back on the block", lambda: board.js("return document.activeElement.dataset.id") == str(e["appointment_id"]))
    if api.appointment(e["appointment_id"])[0]["schedule"]["time"][:5] != off_grid:
        fail(f"the editor's bay change moved the start off {off_grid}: {api.appointment(e['appointment_id'])[0]['schedule']}")
    step(f"Enter on a block and the editor's bay picker moved appointment {e['appointment_id']} (at {off_grid}) to {e_target['title']}, same start")

    # A sideways drag keeps an off-grid start: only a move in time snaps to the grid.
    lanes_now = board.lanes()
    here = [l["key"] for l in lanes_now].index(f"bay:{e_target['id']}")
    sideways = None
    for n in (here + 1, here - 1):
        if 0 <= n < len(lanes_now) and lanes_now[n]["droppable"] and lanes_now[n]["key"].startswith("bay:"):
            board.scroll_block_into_view(e["appointment_id"])
            point = board.drop_point(e["appointment_id"], lanes_now[n]["key"])
            if point:
                sideways = (lanes_now[n], point)
                break
    if not sideways:
        fail(f"no lane beside {e_target['title']} on screen to drag appointment {e['appointment_id']} to")
    side, point = sideways
    board.drag(point)
    dragged = wait_for("the sideways drag in the API", lambda: (lambda x: x if x["column"] == side["title"] else None)(api.appointment(e["appointment_id"])[0]))
    if dragged["schedule"]["time"][:5] != off_grid:
        fail(f"dragging appointment {e['appointment_id']} sideways moved its start from {off_grid} to {dragged['schedule']['time']}")
    step(f"dragging it sideways to {side['title']} kept its start at {off_grid}")

    # The server goes away and comes back: the stream reconnects, resuming with Last-Event-ID.
    if server.proc:
        driver.get_log("performance")
        f = restart_and_move(server, driver, board, api, shop, today, bays[0])
        wait_for("a change after the restart on the page", lambda: (board.block(f) or {}).get("bay") == str(bays[0]["id"]), within=15)
        wait_for("the live stream again", lambda: driver.find_element(By.ID, "live").text == "Live")
        resumed = []
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent" and "/api/v1/events/stream" in message["params"]["request"]["url"]:
                headers = {k.lower(): v for k, v in message["params"]["request"]["headers"].items()}
                resumed.append(headers.get("last-event-id", ""))
        if not resumed or not all(h.startswith("evt_") for h in resumed):
            fail(f"the stream reconnected without Last-Event-ID: {resumed}")
        browser_errors(driver, "the restart", allowed=["net::ERR_"])
        step(f"after the server was killed and restarted the stream came back with Last-Event-ID ({len(resumed)} attempts) and the board kept updating")

        # A page that has had no event yet has no cursor: when its connection drops and a change is
        # made before it is back, the new connection starts at the newest event, so the page must
        # reload what it shows. (The stream is blocked in the browser while the change is made.)
        driver.refresh()
        wait_for("the board after a reload", lambda: driver.find_element(By.ID, "live").text == "Live"
                 and on_screen(board) == expected_blocks(api.day(shop["shop_id"], today), bay_ids), within=15)
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/v1/events/stream*"]})
        g = restart_and_move(server, driver, board, api, shop, today, bays[0])
        time.sleep(1.5)
        if (board.block(g) or {}).get("bay") == str(bays[0]["id"]):
            fail("the change reached the page while its stream was blocked")
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        wait_for("the change made while the page had no stream", lambda: (board.block(g) or {}).get("bay") == str(bays[0]["id"]), within=25)
        wait_for("the live stream again", lambda: driver.find_element(By.ID, "live").text == "Live")
        browser_errors(driver, "the blocked stream", allowed=["net::ERR_"])
        step("a page that lost its stream before any event reloaded once it was back, and showed the change made meanwhile")

    # 768 px wide: the controls stay reachable, the lanes scroll sideways.
    board.viewport(768, 1024)
    time.sleep(0.3)
    for control in ["shop", "prev-day", "date", "next-day", "today", "sign-out"]:
        r = board.rect(f"#{control}")
        if not r or r["left"] < 0 or r["right"] > 768 or r["width"] == 0:
            fail(f"#{control} is not on screen at 768 px: {r}")
    if board.js("return document.documentElement.scrollWidth") > 768:
        fail("the page itself scrolls sideways at 768 px")
    if not board.js("const s = document.getElementById('scroll'); return s.scrollWidth > s.clientWidth"):
        fail("the lanes do not scroll sideways at 768 px")
    board.js("const s = document.getElementById('scroll'); s.scrollLeft = 0; s.scrollTop = 0;")
    path = os.path.join(shots, "board-768.png")
    driver.save_screenshot(path)
    print(f"board: screenshot {path}", flush=True)
    board.js("const s = document.getElementById('scroll'); s.scrollLeft = s.scrollWidth;")
    last = board.lanes()[-1]["key"]
    r, s = board.rect(f".lane[data-lane-key='{last}']"), board.rect("#scroll")
    if r["right"] > s["right"] + 1:
        fail("the last lane cannot be scrolled into view at 768 px")
    step("at 768 px the controls are on screen and the lanes scroll sideways")

    # Signing out forgets the key.
    driver.find_element(By.ID, "sign-out").click()
    wait_for("the key prompt again", lambda: driver.find_element(By.ID, "key").is_displayed())
    if board.js("return sessionStorage.length"):
        fail("signing out left the key in sessionStorage")
    step("signing out forgets the key")

    browser_errors(driver, "the rest")
    step("the browser logged no error but the 401, the 412 and the restart's it was meant to")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default="target/debug/autoshop")
    parser.add_argument("--screenshots", default="target/board-screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    # For working on the page: a server already running (its data is changed by the test).
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for path in (args.binary, args.chromium, args.chromedriver):
        if not os.access(path, os.X_OK):
            sys.exit(f"board: {path} is missing or not executable")
    os.makedirs(args.screenshots, exist_ok=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="autoshop-board-") as work:
        server = Server(os.path.abspath(args.binary), work)
        if args.base:
            server.base, server.key = args.base, args.key
        else:
            server.start()
        driver = None
        try:
            driver = launch(args.chromium, args.chromedriver, os.path.join(work, "profile"))
            run(server, driver, os.path.abspath(args.screenshots))
        except Exception:
            if driver:
                path = os.path.join(os.path.abspath(args.screenshots), "board-failure.png")
                driver.save_screenshot(path)
                print(f"board: screenshot of the failure {path}", file=sys.stderr)
                for entry in driver.get_log("browser"):
                    print(f"board: browser log: {entry['level']} {entry['message']}", file=sys.stderr)
            raise
        finally:
            if driver:
                driver.quit()
            server.stop()
    print(f"board: all checks passed in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
