// Shop-local calendar and clock, whatever the browser's own time zone is: every conversion goes
// through Intl.DateTimeFormat with the shop's IANA zone, and dates travel as `YYYY-MM-DD` text.

const partsFormatters = new Map();

function partsFormatter(timeZone) {
  let f = partsFormatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-CA", {
      timeZone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    });
    partsFormatters.set(timeZone, f);
  }
  return f;
}

/** An API instant (`2026-11-23T14:00:00.000000Z`) as a Date (JS keeps milliseconds). */
export function parseInstant(text) {
  return new Date(text.replace(/(\.\d{3})\d+/, "$1"));
}

/** The wall clock of `instant` in `timeZone`: `{date: "YYYY-MM-DD", minutes}` (minutes since midnight). */
export function wallClock(instant, timeZone) {
  const p = {};
  for (const { type, value } of partsFormatter(timeZone).formatToParts(instant)) p[type] = value;
  const hour = Number(p.hour) % 24;
  return { date: `${p.year}-${p.month}-${p.day}`, minutes: hour * 60 + Number(p.minute) + Number(p.second) / 60 };
}

/** Today's date in `timeZone`. */
export function todayIn(timeZone) {
  return wallClock(new Date(), timeZone).date;
}

/** 0 = Sunday .. 6 = Saturday, for a `YYYY-MM-DD` calendar date. */
export function weekday(date) {
  return new Date(`${date}T00:00:00Z`).getUTCDay();
}

export function addDays(date, days) {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

/** Whole days from `a` to `b` (calendar dates). */
export function daysBetween(a, b) {
  return Math.round((Date.parse(`${b}T00:00:00Z`) - Date.parse(`${a}T00:00:00Z`)) / 86400000);
}

/** `HH:MM` (24 h) of minutes since midnight. */
export function hhmm(minutes) {
  const m = Math.round(minutes);
  return `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
}

/** Minutes since midnight of `HH:MM[:SS]`. */
export function minutesOf(text) {
  const [h, m, s] = text.split(":").map(Number);
  return h * 60 + m + (s || 0) / 60;
}

const clockFormatter = new Intl.DateTimeFormat(undefined, { timeZone: "UTC", hour: "numeric", minute: "2-digit" });

/** A wall-clock time in the reader's locale (`8:30 AM`, `08:30`). */
export function clockLabel(minutes) {
  const m = Math.round(minutes) % (24 * 60);
  return clockFormatter.format(Date.UTC(2000, 0, 1, Math.floor(m / 60), m % 60));
}

const dayFormatter = new Intl.DateTimeFormat(undefined, { timeZone: "UTC", weekday: "long", day: "numeric", month: "long", year: "numeric" });

/** `Monday, 23 November 2026` (in the reader's locale) for a calendar date. */
export function dayLabel(date) {
  return dayFormatter.format(new Date(`${date}T00:00:00Z`));
}

/** The zone's current UTC offset, as `UTC−06:00`. */
export function offsetLabel(timeZone, at = new Date()) {
  const f = new Intl.DateTimeFormat("en-US", { timeZone, timeZoneName: "longOffset" });
  const part = f.formatToParts(at).find((p) => p.type === "timeZoneName");
  return part ? part.value.replace("GMT", "UTC").replace("-", "\u2212") || "UTC" : "";
}
