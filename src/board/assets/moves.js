// Moving a block: by dragging it (pointer events: mouse, pen and touch alike) or with the
// editor dialog (the keyboard way, which can also mark it done). Either way the save is a PUT of
// the whole body (PUT validates like create) with the If-Match of the representation shown.

import { $, alertMessage, el, notice } from "./dom.js";
import { applyAppointment, currentShop, flash, state } from "./state.js";
import { PX_PER_MIN, SNAP_MIN, nameText, scheduleRender, vehicleText } from "./view.js";
import * as zone from "./zone.js";

const DRAG_THRESHOLD_PX = 5;

// ---------------------------------------------------------------------------------------------
// Saving a move: PUT the whole body (PUT validates like create) with If-Match.

/** The ETag of `a` as shown: `{etag}`, or `{conflict, fresh}` when the server's copy differs. */
async function etagFor(a) {
  const id = a.appointment_id;
  const json = JSON.stringify(a);
  const cached = state.etags.get(id);
  if (cached && cached.json === json) return { etag: cached.etag };
  const r = await state.api.request("GET", `/api/v1/appointments/${id}`);
  if (r.status !== 200) return { conflict: true, fresh: null, status: r.status };
  const freshJson = JSON.stringify(r.body);
  state.etags.set(id, { json: freshJson, etag: r.etag });
  return freshJson === json ? { etag: r.etag } : { conflict: true, fresh: r.body, status: 412 };
}

function safeEtag(a) {
  return etagFor(a).catch((e) => ({ error: e }));
}

function putBody(a, change) {
  const moved = change.minutes !== undefined && change.minutes !== zone.minutesOf(a.schedule.time);
  return {
    shop_id: a.shop_id,
    // Unchanged: the exact instant. Moved: the shop-local time, which the server reads in the shop's zone.
    date: moved ? `${state.date}T${zone.hhmm(change.minutes)}:00` : a.schedule.start,
    year: a.vehicle.year,
    make: a.vehicle.make,
    model: a.vehicle.model,
    home_phone: a.phone.home,
    work_phone: a.phone.work,
    cell_phone: a.phone.cell,
    customer_id: a.customer_id,
    vehicle_id: a.vehicle_id,
    repair_order_id: a.repair_order_id,
    employee_id: a.employee_id,
    first_name: a.first_name,
    last_name: a.last_name,
    email: a.email,
    reason: a.reason,
    status: a.status,
    hours: a.hours,
    source: a.source,
    done: change.done !== undefined ? change.done : a.done,
    column: change.column !== undefined ? change.column : a.column,
  };
}

async function refetch(id) {
  const r = await state.api.request("GET", `/api/v1/appointments/${id}`);
  if (r.status === 200) {
    state.etags.set(id, { json: JSON.stringify(r.body), etag: r.etag });
    applyAppointment(r.body, false);
    return r.body;
  }
  if (r.status === 404) state.appointments.delete(id);
  return null;
}

function conflict(id, fresh) {
  if (fresh) applyAppointment(fresh, false);
  flash(id, "conflict");
  alertMessage("Someone else changed this appointment in the meantime, so your change was not saved. The board now shows its current state.", 412);
}

/**
 * Saves `change` ({laneKey?, column?, minutes?, done?}) to the appointment as the user saw it
 * (`snapshot`), with the ETag of that representation.
 */
async function save(snapshot, tagPromise, change) {
  const id = snapshot.appointment_id;
  state.pending.set(id, { laneKey: change.laneKey, minutes: change.minutes });
  alertMessage("");
  scheduleRender();
  try {
    const tag = await (tagPromise || safeEtag(snapshot));
    if (tag.error) throw tag.error;
    if (tag.conflict) {
      if (tag.status === 404) {
        state.appointments.delete(id);
        alertMessage("This appointment no longer exists.", 404);
      } else conflict(id, tag.fresh);
      return;
    }
    const r = await state.api.request("PUT", `/api/v1/appointments/${id}`, { body: putBody(snapshot, change), headers: { "If-Match": tag.etag } });
    if (r.status === 200) {
      state.etags.set(id, { json: JSON.stringify(r.body), etag: r.etag });
      applyAppointment(r.body, false);
      notice(describeSaved(r.body));
    } else if (r.status === 412) {
      conflict(id, await refetch(id));
    } else if (r.status === 409) {
      await refetch(id);
      alertMessage("This appointment was cancelled; cancelled appointments cannot be changed.", 409);
    } else if (r.status === 404) {
      state.appointments.delete(id);
      alertMessage("This appointment no longer exists.", 404);
    } else if (r.status === 403) {
      alertMessage("This API key may only read: moving appointments needs a write or admin key.", 403);
    } else if (r.status !== 401) {
      const detail = r.body?.errors ? Object.values(r.body.errors).flat().join(" ") : r.body?.detail;
      alertMessage(`Not saved: ${detail || `the server answered ${r.status}`}`, r.status);
    }
  } catch (e) {
    alertMessage(`Not saved: ${e.message || "the server could not be reached"}. Try again.`);
  } finally {
    state.pending.delete(id);
    scheduleRender();
  }
}

function describeSaved(a) {
  const shop = currentShop();
  const start = shop ? zone.wallClock(zone.parseInstant(a.schedule.start), shop.timezone) : null;
  const where = a.column ? a.column : "Unassigned";
  const when = start ? ` at ${zone.clockLabel(start.minutes)}` : "";
  return `Saved: ${nameText(a)} in ${where}${when}${a.done ? ", done" : ""}.`;
}

// ---------------------------------------------------------------------------------------------
// Dragging (pointer events: mouse, pen and touch alike).

export function onPointerDown(e) {
  const blockEl = e.target.closest(".appt");
  if (!blockEl || e.button !== 0 || state.drag || !state.view) return;
  const id = Number(blockEl.dataset.id);
  const a = state.appointments.get(id);
  const item = state.view.items.get(id);
  if (!a || !item || state.pending.has(id)) return;
  e.preventDefault();
  blockEl.setPointerCapture(e.pointerId);
  const rect = blockEl.getBoundingClientRect();
  state.drag = {
    id, el: blockEl, pointerId: e.pointerId, x0: e.clientX, y0: e.clientY, grabY: e.clientY - rect.top,
    moved: false, snapshot: a, item, tag: safeEtag(a), target: null, ghost: null,
  };
  // On the window, not the block: the capture can be lost (the browser decides), the drag must not.
  window.addEventListener("pointermove", onPointerMove);
  window.addEventListener("pointerup", onPointerUp);
  window.addEventListener("pointercancel", onPointerCancel);
}

function onPointerMove(e) {
  const d = state.drag;
  if (!d || e.pointerId !== d.pointerId) return;
  if (!d.moved) {
    if (Math.hypot(e.clientX - d.x0, e.clientY - d.y0) < DRAG_THRESHOLD_PX) return;
    d.moved = true;
    d.el.classList.add("dragging");
    document.body.classList.add("is-dragging");
  }
  autoScroll(e);
  d.target = dropTarget(e.clientX, e.clientY, d);
  showGhost(d);
}

/** The lane under the pointer (by its column) and the snapped start time. */
function dropTarget(x, y, d) {
  const { span, lanes } = state.view;
  for (const laneEl of $("grid").querySelectorAll(".lane")) {
    const r = laneEl.getBoundingClientRect();
    if (x < r.left || x >= r.right) continue;
    const lane = lanes.get(laneEl.dataset.laneKey);
    if (!lane || !lane.droppable) return null;
    const length = d.item.end - d.item.start;
    const raw = span.start + (y - d.grabY - r.top) / PX_PER_MIN;
    // Within half a step of its start the block keeps its time (a move to another lane only,
    // even off the grid: 10:07 stays 10:07); further away it snaps to the grid.
    let minutes = Math.abs(raw - d.item.start) < SNAP_MIN / 2 ? d.item.start : Math.round(raw / SNAP_MIN) * SNAP_MIN;
    minutes = Math.max(span.start, Math.min(minutes, Math.max(span.start, span.end - length)));
    return { laneKey: lane.key, column: lane.column, title: lane.title, minutes, laneEl };
  }
  return null;
}

function showGhost(d) {
  if (d.ghost) d.ghost.remove();
  d.ghost = null;
  const t = d.target;
  if (!t) return;
  const length = d.item.end - d.item.start;
  d.ghost = el("div", {
    class: "ghost",
    "aria-hidden": "true",
    style: { top: `${(t.minutes - state.view.span.start) * PX_PER_MIN}px`, height: `${Math.max(20, length * PX_PER_MIN - 2)}px` },
  }, `${zone.clockLabel(t.minutes)} · ${t.title}`);
  t.laneEl.append(d.ghost);
}

function autoScroll(e) {
  const scroll = $("scroll");
  const r = scroll.getBoundingClientRect();
  const edge = 36;
  const dx = e.clientX < r.left + edge ? -16 : e.clientX > r.right - edge ? 16 : 0;
  const dy = e.clientY < r.top + edge ? -16 : e.clientY > r.bottom - edge ? 16 : 0;
  if (dx || dy) scroll.scrollBy(dx, dy);
}

export function endDrag() {
  const d = state.drag;
  state.drag = null;
  if (!d) return null;
  window.removeEventListener("pointermove", onPointerMove);
  window.removeEventListener("pointerup", onPointerUp);
  window.removeEventListener("pointercancel", onPointerCancel);
  if (d.el.hasPointerCapture(d.pointerId)) d.el.releasePointerCapture(d.pointerId);
  d.el.classList.remove("dragging");
  document.body.classList.remove("is-dragging");
  if (d.ghost) d.ghost.remove();
  return d;
}

function onPointerUp(e) {
  const d = state.drag;
  if (!d || e.pointerId !== d.pointerId) return;
  endDrag();
  if (!d.moved) {
    openEditor(d.id, d.tag);
  } else if (d.target && (d.target.laneKey !== d.item.laneKey || d.target.minutes !== d.item.start)) {
    const change = { minutes: d.target.minutes };
    if (d.target.laneKey !== d.item.laneKey) Object.assign(change, { laneKey: d.target.laneKey, column: d.target.column });
    save(d.snapshot, d.tag, change);
    return;
  }
  if (state.renderDeferred) scheduleRender();
}

function onPointerCancel(e) {
  const d = state.drag;
  if (!d || e.pointerId !== d.pointerId) return;
  endDrag();
  scheduleRender();
}

// ---------------------------------------------------------------------------------------------
// The editor: the keyboard way to move a block (and to mark it done).

export function openEditor(id, tag) {
  const a = state.appointments.get(id);
  const shop = currentShop();
  const item = state.view?.items.get(id);
  if (!a || !shop || !item) return;
  // The time field shows whole minutes: the start changes only if the user changes the field.
  state.editing = { id, snapshot: a, tag: tag || safeEtag(a), item, shownTime: zone.hhmm(item.start) };
  $("editor-title").textContent = `${nameText(a)} · ${vehicleText(a)}`;
  const details = [
    ["Time", `${zone.clockLabel(item.start)} – ${zone.clockLabel(item.end)} (${a.hours} h)`],
    ["Reason", a.reason || "—"],
    ["Phone", a.phone.cell || a.phone.home || a.phone.work || "—"],
    ["Email", a.email || "—"],
    ["Source", a.source],
    ["Work order", a.status || "—"],
  ];
  $("editor-details").replaceChildren(...details.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const lanes = [...state.view.lanes.values()];
  $("editor-bay").replaceChildren(...lanes.map((l) => el("option", { value: l.key, disabled: !l.droppable && l.key !== item.laneKey }, l.inactive ? `${l.title} (inactive)` : l.title)));
  $("editor-bay").value = item.laneKey;
  $("editor-time").value = state.editing.shownTime;
  $("editor-done").checked = a.done;
  $("editor-error").textContent = "";
  $("editor").showModal();
  $("editor-bay").focus();
}

export function submitEditor(e) {
  e.preventDefault();
  const editing = state.editing;
  if (!editing) return;
  const { item, snapshot } = editing;
  const change = {};
  const laneKey = $("editor-bay").value;
  if (laneKey !== item.laneKey) Object.assign(change, { laneKey, column: state.view.lanes.get(laneKey)?.column ?? null });
  const time = $("editor-time").value;
  if (!/^\d{2}:\d{2}$/.test(time)) {
    $("editor-error").textContent = "Enter a start time.";
    return;
  }
  if (time !== editing.shownTime) change.minutes = zone.minutesOf(time);
  const done = $("editor-done").checked;
  if (done !== snapshot.done) change.done = done;
  closeEditor();
  if (Object.keys(change).length) save(snapshot, editing.tag, change);
}

export function closeEditor() {
  const id = state.editing?.id;
  state.editing = null;
  if ($("editor").open) $("editor").close();
  if (id !== undefined) $("grid").querySelector(`.appt[data-id="${id}"]`)?.focus({ preventScroll: true });
}
