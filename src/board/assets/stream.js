// The live feed, `GET /api/v1/events/stream`, read with fetch(): EventSource cannot send the
// Authorization header. The text/event-stream parser follows the HTML standard's rules (fields
// `id`, `event`, `data`; comments; CR, LF or CRLF line ends), and a dropped connection resumes
// with `Last-Event-ID`, so no event is missed across reconnects.

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 10000;
// The server sends a keep-alive comment every 15 s: a connection silent for longer than this
// has died without closing (a laptop asleep, a network change, a proxy dropping it).
const SILENCE_MS = 40000;

/** Splits a text/event-stream into messages `{id, event, data}`. */
export class SseParser {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.data = [];
    this.event = "";
    this.id = null;
  }

  push(text) {
    this.buffer += text;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      // A lone CR at the end may be the first half of a CRLF: wait for the next chunk.
      if (!m || (m[0] === "\r" && m.index === this.buffer.length - 1)) return;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.onMessage({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
      this.reset();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
  }
}

/**
 * A stream that stays open: `onEvent(event)` gets each event object, `onState("live" |
 * "connecting" | "off")` reports the connection, `onReset()` runs when what the caller shows
 * may have missed events: a connection opened without a cursor (none came yet, or it was older
 * than the server keeps: 410) after the caller loaded its data. `start(timeoutMs)` resolves once
 * the first connection is open, has failed, or the time is up, so the caller can load data
 * after it; a connection that opens only later makes it reload.
 */
export class EventStream {
  constructor(api, { query = "", onEvent, onState = () => {}, onReset = () => {} }) {
    this.api = api;
    this.query = query;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onReset = onReset;
    this.lastId = null;
    this.controller = null;
    this.stopped = true;
    // Whether start() has resolved: the caller has loaded (or is loading) its data.
    this.settled = false;
  }

  start(timeoutMs = 3000) {
    this.stopped = false;
    return new Promise((resolve) => {
      const settle = () => {
        this.settled = true;
        resolve();
      };
      setTimeout(settle, timeoutMs);
      this.loop(settle);
    });
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
    this.onState("off");
  }

  async loop(opened) {
    let delay = RETRY_MIN_MS;
    while (!this.stopped) {
      this.onState("connecting");
      this.controller = new AbortController();
      try {
        const headers = this.api.headers({ Accept: "text/event-stream" });
        if (this.lastId) headers["Last-Event-ID"] = this.lastId;
        // The server answers at once: a connection that hangs before its headers is dead too.
        const controller = this.controller;
        const connecting = setTimeout(() => controller.abort(), SILENCE_MS);
        const response = await fetch(`/api/v1/events/stream${this.query}`, { headers, signal: controller.signal, cache: "no-store" }).finally(() =>
          clearTimeout(connecting),
        );
        if (response.status === 401) {
          this.api.onUnauthorized?.();
          break;
        }
        if (response.status === 410) {
          // Our cursor fell out of the retention window: start from now (and reload, below,
          // once that connection is open, so nothing committed in between is missed).
          this.lastId = null;
          continue;
        }
        if (!response.ok || !response.body) throw new Error(`event stream answered ${response.status}`);
        // Without a cursor the server starts at its newest event: whatever changed since the
        // caller loaded its data, before this connection, would never arrive.
        const reload = this.lastId === null && this.settled;
        this.onState("live");
        opened();
        delay = RETRY_MIN_MS;
        if (reload) this.onReset();
        await this.read(response.body);
      } catch (e) {
        if (this.stopped) break;
        console.warn("board: event stream interrupted", e);
      }
      opened();
      if (this.stopped) break;
      this.onState("connecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
    opened();
  }

  async read(body) {
    const parser = new SseParser((message) => {
      if (message.id) this.lastId = message.id;
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      this.onEvent(event);
    });
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    const controller = this.controller;
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), SILENCE_MS);
    };
    try {
      arm();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        arm();
        parser.push(value);
      }
    } finally {
      clearTimeout(watchdog);
      reader.releaseLock();
    }
  }
}
