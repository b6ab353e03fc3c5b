// The scheduling board: one shop's day, bays as lanes, appointments as blocks. Everything comes
// from the public API with the key of this tab; changes made elsewhere arrive on the event
// stream; a move is a PUT with If-Match, so it never overwrites a change the user has not seen.
// This module signs in and out, loads shops and days, follows the stream and wires the page.

import { Api, keyStore, q } from "./api.js";
import { $, alertMessage, el } from "./dom.js";
import { closeEditor, endDrag, onPointerDown, openEditor, submitEditor } from "./moves.js";
import { EventStream } from "./stream.js";
import { applyAppointment, currentShop, noteVersion, state } from "./state.js";
import { render, scheduleRender } from "./view.js";
import * as zone from "./zone.js";

const STREAM_TYPES = "appointment.*,bay.*,shop.*,shop_hours.*";

// ---------------------------------------------------------------------------------------------
// Signing in and out.

function showLogin(message = "") {
  $("controls").hidden = true;
  $("board").hidden = true;
  $("login").hidden = false;
  $("key-error").textContent = message;
  $("key").value = "";
  $("key").focus();
}

function signOut(message = "") {
  keyStore.clear();
  if (state.stream) state.stream.stop();
  Object.assign(state, { api: null, stream: null, shops: [], shopId: null, appointments: new Map(), view: null });
  state.etags.clear();
  state.loadGen++;
  if ($("editor").open) $("editor").close();
  showLogin(message);
}

async function openBoard(key) {
  const api = new Api(key, () => {
    if (state.api === api) signOut("That API key was refused: it may be mistyped or revoked.");
  });
  state.api = api;
  $("login").hidden = true;
  $("controls").hidden = false;
  $("board").hidden = false;
  $("day-note").textContent = "Loading…";
  try {
    await loadShops();
  } catch (e) {
    if (state.api === api) signOut(`The shops could not be loaded: ${e.message}`);
    return;
  }
  if (state.api !== api) return;
  readHash();
  const stream = new EventStream(api, {
    query: `?filter%5Btype%5D=${q(STREAM_TYPES)}`,
    onEvent,
    onState: setLive,
    onReset: () => refresh({ shops: true, day: true }),
  });
  state.stream = stream;
  // The stream opens first, so nothing committed after the loads below can be missed.
  await stream.start(3000);
  if (state.api !== api) return;
  selectShop(state.shopId, state.date);
}

function setLive(s) {
  const live = $("live");
  live.dataset.state = s;
  live.textContent = { live: "Live", connecting: "Reconnecting…", off: "Offline" }[s] || s;
  live.title = s === "live" ? "Changes made elsewhere appear here as they happen." : "Live updates are paused until the connection is back.";
}

// ---------------------------------------------------------------------------------------------
// Shops, days and loading.

async function loadShops() {
  const body = await state.api.get("/api/v1/settings/shop_info?with=hours,bays");
  state.shops = body.data.slice().sort((a, b) => a.name.localeCompare(b.name) || a.shop_id - b.shop_id);
  const select = $("shop");
  const current = state.shopId;
  select.replaceChildren(...state.shops.map((s) => el("option", { value: s.shop_id }, s.city ? `${s.name} (${s.city})` : s.name)));
  if (!state.shops.length) {
    $("day-note").textContent = "This key sees no shop.";
    return;
  }
  if (!state.shops.some((s) => s.shop_id === current)) state.shopId = state.shops[0].shop_id;
  select.value = String(state.shopId);
}

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const shop = Number(params.get("shop"));
  if (state.shops.some((s) => s.shop_id === shop)) state.shopId = shop;
  const date = params.get("date");
  if (date && /^\d{4}-\d{2}-\d{2}$/.test(date)) state.date = date;
}

function writeHash() {
  history.replaceState(null, "", `#shop=${state.shopId}&date=${state.date}`);
}

function selectShop(shopId, date) {
  state.shopId = shopId;
  const shop = currentShop();
  if (!shop) return;
  $("shop").value = String(shopId);
  state.date = date || zone.todayIn(shop.timezone);
  $("zone").textContent = `${shop.timezone} (${zone.offsetLabel(shop.timezone)})`;
  $("zone").title = "Times on the board are the shop's local times.";
  state.appointments = new Map();
  state.scrollToStart = true;
  writeHash();
  $("date").value = state.date;
  return loadDay();
}

async function loadDay() {
  const gen = ++state.loadGen;
  const { shopId, date } = state;
  state.loading = true;
  state.bufferedEvents = [];
  $("board").setAttribute("aria-busy", "true");
  // A new shop or day shows its own (empty) lanes at once, not the last day's blocks.
  if (!state.appointments.size) {
    render();
    $("day-note").textContent = `${zone.dayLabel(date)} · loading…`;
  }
  try {
    const list = await state.api.all(`/api/v1/appointments?filter%5Bshop_id%5D=${shopId}&filter%5Bdate%5D=${date}&sort=date`);
    if (gen !== state.loadGen) return;
    state.appointments = new Map(list.filter(noteVersion).map((a) => [a.appointment_id, a]));
    // Events that arrived while the list was read: the stream is ordered, so replaying them
    // leaves each appointment at its latest state.
    for (const a of state.bufferedEvents) applyAppointment(a, false);
  } catch (e) {
    if (gen === state.loadGen) alertMessage(`The appointments could not be loaded: ${e.message}`, e.status);
  } finally {
    if (gen === state.loadGen) {
      state.loading = false;
      state.bufferedEvents = [];
      $("board").removeAttribute("aria-busy");
      render();
    }
  }
}

let refreshTimer = null;
const refreshWanted = { shops: false, day: false };

/** Reloads the shops (bays, hours, zone) and/or the day, soon, once for a burst of events. */
function refresh({ shops = false, day = false }) {
  refreshWanted.shops ||= shops;
  refreshWanted.day ||= day;
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    const wanted = { ...refreshWanted };
    refreshWanted.shops = refreshWanted.day = false;
    if (!state.api) return;
    try {
      const before = state.shopId;
      if (wanted.shops) await loadShops();
      // The shop shown is gone from the key's sight: show the first one left.
      if (state.shopId !== before) {
        await selectShop(state.shopId, null);
        return;
      }
      const shop = currentShop();
      if (shop) $("zone").textContent = `${shop.timezone} (${zone.offsetLabel(shop.timezone)})`;
      if (wanted.day) await loadDay();
      else scheduleRender();
    } catch (e) {
      alertMessage(`The board could not be refreshed: ${e.message}`, e.status);
    }
  }, 150);
}

// ---------------------------------------------------------------------------------------------
// Live updates.

function onEvent(event) {
  const kind = event.type.split(".")[0];
  if (kind === "appointment") {
    if (state.loading) state.bufferedEvents.push(event.data);
    else {
      applyAppointment(event.data, true);
      scheduleRender();
    }
    return;
  }
  // A bay renamed changes its appointments' `column`; a new zone moves their local dates.
  const here = event.shop_id === state.shopId;
  refresh({ shops: true, day: here && (event.type === "bay.updated" || event.type === "shop.updated") });
}

// ---------------------------------------------------------------------------------------------
// Wiring.

function changeDate(date) {
  if (!date || !/^\d{4}-\d{2}-\d{2}$/.test(date) || !currentShop()) return;
  state.date = date;
  $("date").value = date;
  state.appointments = new Map();
  state.scrollToStart = true;
  writeHash();
  loadDay();
}

function wire() {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("key").value.trim();
    if (!key) return;
    keyStore.set(key);
    $("key").value = "";
    openBoard(key);
  });
  $("sign-out").addEventListener("click", () => signOut());
  $("shop").addEventListener("change", () => selectShop(Number($("shop").value), state.date));
  $("date").addEventListener("change", () => changeDate($("date").value));
  $("prev-day").addEventListener("click", () => changeDate(zone.addDays(state.date, -1)));
  $("next-day").addEventListener("click", () => changeDate(zone.addDays(state.date, 1)));
  $("today").addEventListener("click", () => {
    const shop = currentShop();
    if (shop) changeDate(zone.todayIn(shop.timezone));
  });
  const grid = $("grid");
  grid.addEventListener("pointerdown", onPointerDown);
  grid.addEventListener("keydown", (e) => {
    const blockEl = e.target.closest?.(".appt");
    if (blockEl && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      openEditor(Number(blockEl.dataset.id));
    }
  });
  $("editor-form").addEventListener("submit", submitEditor);
  $("editor-cancel").addEventListener("click", closeEditor);
  $("editor").addEventListener("cancel", (e) => {
    e.preventDefault();
    closeEditor();
  });
  window.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && state.drag) {
      endDrag();
      scheduleRender();
    }
  });
  // The now-line moves; the day shown as "today" changes at the shop's midnight.
  setInterval(() => {
    if (state.view) scheduleRender();
  }, 30000);
}

wire();
const saved = keyStore.get();
if (saved) openBoard(saved);
else showLogin();
