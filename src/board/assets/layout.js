// Where things go on the board: the hours a day shows, and side-by-side columns for
// appointments of one lane that overlap in time.

import { minutesOf, weekday } from "./zone.js";

const DEFAULT_OPEN = 8 * 60;
const DEFAULT_CLOSE = 18 * 60;
const DAY = 24 * 60;

/**
 * The span of a day on the board: the shop's opening hours of that weekday, widened to whole
 * hours and to every appointment of the day. `open` lists the opening intervals (minutes).
 */
export function daySpan(hours, date, items) {
  const day = weekday(date);
  const open = hours
    .filter((h) => h.day === day)
    .map((h) => ({ start: minutesOf(h.open), end: h.close === "24:00" ? DAY : minutesOf(h.close) }))
    .sort((a, b) => a.start - b.start);
  let start = open.length ? open[0].start : DEFAULT_OPEN;
  let end = open.length ? Math.max(...open.map((o) => o.end)) : DEFAULT_CLOSE;
  for (const item of items) {
    start = Math.min(start, item.start);
    end = Math.max(end, item.end);
  }
  start = Math.max(0, Math.floor(start / 60) * 60);
  end = Math.min(DAY, Math.ceil(end / 60) * 60);
  if (end - start < 60) end = Math.min(DAY, start + 60);
  return { start, end, open };
}

/** The closed stretches of `[span.start, span.end)` (for shading). */
export function closedStretches(span) {
  const out = [];
  let at = span.start;
  for (const o of span.open) {
    if (o.start > at) out.push({ start: at, end: Math.min(o.start, span.end) });
    at = Math.max(at, o.end);
  }
  if (at < span.end) out.push({ start: at, end: span.end });
  return out.filter((s) => s.end > s.start);
}

/**
 * Side-by-side columns for one lane: items `{id, start, end}` that overlap share a cluster and
 * each takes the first column free at its start. Returns `{columns, place: Map id -> {col, cols}}`.
 */
export function columnsFor(items) {
  const sorted = [...items].sort((a, b) => a.start - b.start || b.end - a.end || a.id - b.id);
  const place = new Map();
  let cluster = [];
  let clusterEnd = -Infinity;
  let ends = [];
  let widest = 1;
  const close = () => {
    for (const id of cluster) place.get(id).cols = ends.length;
    widest = Math.max(widest, ends.length);
    cluster = [];
    ends = [];
  };
  for (const item of sorted) {
    if (item.start >= clusterEnd) {
      close();
      clusterEnd = -Infinity;
    }
    let col = ends.findIndex((end) => end <= item.start);
    if (col < 0) {
      col = ends.length;
      ends.push(item.end);
    } else {
      ends[col] = item.end;
    }
    place.set(item.id, { col, cols: 1 });
    cluster.push(item.id);
    clusterEnd = Math.max(clusterEnd, item.end);
  }
  close();
  return { columns: widest, place };
}
