// What the board knows: the shop and day shown, the appointments as the API last showed them,
// and what is under way (loads, drags, saves). Whoever changes it calls `changed()`; the view
// re-renders on it.

export const UNASSIGNED = "unassigned";
const FLASH_MS = 4000;

export const state = {
  api: null,
  stream: null,
  shops: [],
  shopId: null,
  date: null,
  /** The day's live appointments, by id, exactly as the API shows them. */
  appointments: new Map(),
  /** id -> the latest `updated_at` seen, on the day or off it: an older copy is never shown. */
  versions: new Map(),
  /** id -> {json, etag}: the ETag of the representation `json` (for If-Match). */
  etags: new Map(),
  /** id -> {laneKey, minutes, done}: where a block is shown while its save runs. */
  pending: new Map(),
  /** id -> "updated" | "conflict": a short highlight. */
  flash: new Map(),
  loadGen: 0,
  loading: false,
  bufferedEvents: [],
  drag: null,
  renderQueued: false,
  renderDeferred: false,
  scrollToStart: false,
  /** The layout of the last render, for drops: lanes by key, and the day's span. */
  view: null,
  editing: null,
};

let listener = () => {};

/** Registers the one function that redraws the board after a change. */
export function onChange(fn) {
  listener = fn;
}

export function changed() {
  listener();
}

export function currentShop() {
  return state.shops.find((s) => s.shop_id === state.shopId) || null;
}

/**
 * Notes `a`'s version; false when a newer one was seen already (a save's answer or a GET that
 * arrives after the event of a later change must not bring the older state back).
 */
export function noteVersion(a) {
  const seen = state.versions.get(a.appointment_id);
  // Fixed-width UTC timestamps: text order is time order.
  if (seen && a.updated_at && a.updated_at < seen) return false;
  if (a.updated_at) state.versions.set(a.appointment_id, a.updated_at);
  return true;
}

/** Puts the latest representation of an appointment on (or off) the day shown. */
export function applyAppointment(a, highlight) {
  if (!noteVersion(a)) return;
  const id = a.appointment_id;
  const before = state.appointments.get(id);
  const shown = a.shop_id === state.shopId && a.schedule.date === state.date && !a.deleted;
  if (shown) {
    state.appointments.set(id, a);
    // Our own save's event may come before its answer: no "changed elsewhere" highlight then.
    if (highlight && !state.pending.has(id) && (!before || JSON.stringify(before) !== JSON.stringify(a))) flash(id, "updated");
  } else {
    state.appointments.delete(id);
  }
}

/** A short highlight of a block: `updated` (changed elsewhere) or `conflict`. */
export function flash(id, kind) {
  state.flash.set(id, kind);
  setTimeout(() => {
    if (state.flash.get(id) === kind) {
      state.flash.delete(id);
      changed();
    }
  }, FLASH_MS);
}
