// The board drawn from the state: lanes, hours, blocks, the now-line. Redrawn whole on every
// change (a day is tens of blocks), never under a drag.

import { closedStretches, columnsFor, daySpan } from "./layout.js";
import { $, el } from "./dom.js";
import { UNASSIGNED, currentShop, onChange, state } from "./state.js";
import * as zone from "./zone.js";

export const PX_PER_MIN = 1.6;
export const SNAP_MIN = 15;

export function scheduleRender() {
  if (state.drag) {
    state.renderDeferred = true;
    return;
  }
  if (state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => {
    state.renderQueued = false;
    render();
  });
}

function bayLaneKey(bay) {
  return `bay:${bay.id}`;
}

/** The lane an appointment belongs in: its bay (by title, as `column` names it) or unassigned. */
export function laneKeyOf(a, shop) {
  if (a.column === null || a.column === undefined || a.column === "") return UNASSIGNED;
  const bays = shop.bays || [];
  const bay = bays.find((b) => b.title === a.column) || bays.find((b) => b.title.toLowerCase() === a.column.toLowerCase());
  return bay ? bayLaneKey(bay) : `title:${a.column}`;
}

export function vehicleText(a) {
  return [a.vehicle.year, a.vehicle.make, a.vehicle.model].filter(Boolean).join(" ");
}

export function nameText(a) {
  return [a.first_name, a.last_name].filter(Boolean).join(" ") || "No name";
}

/** An appointment placed on the day: start and end in shop-local minutes, its lane. */
function place(a, shop) {
  const tz = shop.timezone;
  const s = zone.wallClock(zone.parseInstant(a.schedule.start), tz);
  const e = zone.wallClock(zone.parseInstant(a.schedule.end), tz);
  const day = 24 * 60;
  const start = s.date === state.date ? s.minutes : s.date < state.date ? 0 : day;
  let end = e.date === state.date ? e.minutes : e.date > state.date ? day : 0;
  if (end <= start) end = Math.min(day, start + SNAP_MIN);
  const item = { id: a.appointment_id, a, start, end, laneKey: laneKeyOf(a, shop), saving: false };
  const pending = state.pending.get(item.id);
  if (pending) {
    if (pending.laneKey !== undefined) item.laneKey = pending.laneKey;
    if (pending.minutes !== undefined) {
      item.end = Math.min(day, pending.minutes + (item.end - item.start));
      item.start = pending.minutes;
    }
    item.saving = true;
  }
  return item;
}

function lanesFor(shop, items) {
  const bays = (shop.bays || []).slice().sort((a, b) => a.order - b.order || a.title.localeCompare(b.title) || a.id - b.id);
  const used = new Set(items.map((i) => i.laneKey));
  const lanes = [{ key: UNASSIGNED, title: "Unassigned", column: null, bayId: "", droppable: true, unassigned: true }];
  for (const bay of bays) {
    const key = bayLaneKey(bay);
    if (!bay.active && !used.has(key)) continue;
    lanes.push({ key, title: bay.title, column: bay.title, bayId: String(bay.id), droppable: bay.active, inactive: !bay.active });
  }
  for (const key of used) {
    if (!lanes.some((l) => l.key === key)) {
      const title = key.slice("title:".length);
      lanes.push({ key, title, column: title, bayId: "", droppable: false, inactive: true });
    }
  }
  return lanes;
}

export function render() {
  const shop = currentShop();
  const grid = $("grid");
  if (!shop || !state.date) return;
  // Replacing the blocks under a drag would drop it: wait for the drop.
  if (state.drag) {
    state.renderDeferred = true;
    return;
  }
  state.renderDeferred = false;
  const focusedId = document.activeElement?.classList?.contains("appt") ? document.activeElement.dataset.id : null;

  const items = [...state.appointments.values()].map((a) => place(a, shop));
  const span = daySpan(shop.hours || [], state.date, items);
  const lanes = lanesFor(shop, items);
  const height = (span.end - span.start) * PX_PER_MIN;
  const y = (minutes) => (minutes - span.start) * PX_PER_MIN;

  for (const lane of lanes) {
    lane.items = items.filter((i) => i.laneKey === lane.key);
    lane.layout = columnsFor(lane.items);
    lane.minWidth = lane.unassigned && !lane.items.length ? 150 : Math.max(170, lane.layout.columns * 104);
  }

  grid.style.setProperty("grid-template-columns", `var(--axis-width) ${lanes.map((l) => `minmax(${l.minWidth}px, 1fr)`).join(" ")}`);
  grid.style.setProperty("--hour", `${60 * PX_PER_MIN}px`);
  grid.style.setProperty("--offset", `${-(span.start % 60) * PX_PER_MIN}px`);
  grid.style.setProperty("--day-height", `${height}px`);

  const children = [el("div", { class: "corner", "aria-hidden": "true" })];
  lanes.forEach((lane, i) => (lane.gridColumn = String(i + 2)));
  for (const lane of lanes) {
    children.push(
      el("div", { class: `lane-head${lane.unassigned ? " unassigned" : ""}${lane.inactive ? " inactive" : ""}`, dataset: { laneKey: lane.key }, style: { "grid-column": lane.gridColumn } },
        el("span", { class: "lane-title" }, lane.title),
        lane.inactive ? el("span", { class: "lane-tag" }, "inactive") : null,
        el("span", { class: "lane-count", "aria-label": `${lane.items.length} appointments` }, String(lane.items.length))));
  }

  const ticks = [];
  for (let m = Math.ceil(span.start / 60) * 60; m < span.end; m += 60) {
    ticks.push(el("span", { class: "tick", style: { top: `${y(m)}px` } }, zone.clockLabel(m)));
  }
  children.push(el("div", { class: "axis", "aria-hidden": "true" }, ticks));

  for (const lane of lanes) {
    const blocks = lane.items.map((item) => block(item, lane, shop, y));
    children.push(el("div", {
      class: `lane${lane.unassigned ? " unassigned" : ""}${lane.droppable ? "" : " inactive"}`,
      role: "group",
      "aria-label": `${lane.title}: ${lane.items.length} appointments`,
      dataset: { laneKey: lane.key, bayId: lane.bayId, title: lane.title, droppable: lane.droppable ? "true" : "false" },
      style: { "grid-column": lane.gridColumn },
    }, blocks));
  }

  for (const stretch of closedStretches(span)) {
    children.push(el("div", { class: "closed", "aria-hidden": "true", style: { "margin-top": `${y(stretch.start)}px`, height: `${(stretch.end - stretch.start) * PX_PER_MIN}px` } }));
  }

  const today = zone.todayIn(shop.timezone);
  if (state.date === today) {
    const now = zone.wallClock(new Date(), shop.timezone).minutes;
    if (now >= span.start && now <= span.end) {
      children.push(el("div", { class: "now-line", id: "now-line", role: "img", "aria-label": `Now, ${zone.clockLabel(now)}`, style: { "margin-top": `${y(now)}px` }, dataset: { minutes: String(Math.floor(now)) } },
        el("span", { class: "now-label" }, zone.clockLabel(now))));
    }
  }
  grid.replaceChildren(...children);

  state.view = { span, lanes: new Map(lanes.map((l) => [l.key, l])), items: new Map(items.map((i) => [i.id, i])) };
  renderNote(shop, span, items.length, today);

  if (focusedId) grid.querySelector(`.appt[data-id="${focusedId}"]`)?.focus({ preventScroll: true });
  if (state.scrollToStart) {
    state.scrollToStart = false;
    const scroll = $("scroll");
    const nowLine = $("now-line");
    scroll.scrollTop = nowLine ? Math.max(0, y(Number(nowLine.dataset.minutes)) - scroll.clientHeight / 3) : 0;
    scroll.scrollLeft = 0;
  }
}

function block(item, lane, shop, y) {
  const a = item.a;
  const { col, cols } = lane.layout.place.get(item.id);
  const range = `${zone.clockLabel(item.start)} – ${zone.clockLabel(item.end)}`;
  // Side by side, a block shows its start; its height shows the rest.
  const time = cols > 1 ? zone.clockLabel(item.start) : range;
  const name = nameText(a);
  const vehicle = vehicleText(a);
  const height = Math.max(20, (item.end - item.start) * PX_PER_MIN - 2);
  const compact = height < 58;
  const flashKind = state.flash.get(item.id);
  const classes = ["appt", compact ? "compact" : "", a.done ? "done" : "", item.saving ? "saving" : "", flashKind ? `flash-${flashKind}` : ""].filter(Boolean).join(" ");
  const label = [range, name, vehicle, a.reason, a.done ? "done" : "not done", `in ${lane.title}`].filter(Boolean).join(", ");
  const lines = compact
    ? [el("span", { class: "appt-line" }, el("span", { class: "appt-time" }, time), " ", el("span", { class: "appt-name" }, name)),
      el("span", { class: "appt-line appt-vehicle" }, [vehicle, a.reason].filter(Boolean).join(" · "))]
    : [el("span", { class: "appt-time" }, time), el("span", { class: "appt-name" }, name), el("span", { class: "appt-vehicle" }, vehicle),
      a.reason ? el("span", { class: "appt-reason" }, a.reason) : null];
  return el("div", {
    class: classes,
    role: "button",
    tabindex: "0",
    "aria-label": label,
    "aria-haspopup": "dialog",
    title: `${label}. Drag to move, or press Enter to change bay, time or done.`,
    dataset: { id: String(item.id), laneKey: lane.key, bayId: lane.bayId, start: zone.hhmm(item.start), end: zone.hhmm(item.end), done: String(a.done) },
    style: {
      top: `${y(item.start)}px`,
      height: `${height}px`,
      left: `calc(${col} * 100% / ${cols} + 3px)`,
      width: `calc(100% / ${cols} - 6px)`,
    },
  },
  a.done ? el("span", { class: "appt-done", title: "Done", "aria-hidden": "true" }, "✓") : null,
  lines);
}

function renderNote(shop, span, count, today) {
  const parts = [zone.dayLabel(state.date)];
  if (state.date === today) parts[0] += " (today)";
  parts.push(span.open.length ? `open ${span.open.map((o) => `${zone.clockLabel(o.start)}–${zone.clockLabel(o.end)}`).join(", ")}` : "closed");
  parts.push(count === 1 ? "1 appointment" : `${count} appointments`);
  $("day-note").textContent = parts.join(" · ");
}

onChange(scheduleRender);
