// The public API as the board calls it: the key in `Authorization`, JSON in and out, problem+json
// errors, and the list envelope walked page by page.

const KEY = "autoshop.board.key";

/** The key of this tab, kept in sessionStorage only (never localStorage, never a cookie). */
export const keyStore = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export class Api {
  /** `onUnauthorized` runs when the key is refused (401): it was revoked or mistyped. */
  constructor(key, onUnauthorized) {
    this.key = key;
    this.onUnauthorized = onUnauthorized;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.key}`, Accept: "application/json", ...extra };
  }

  /** Any request: `{status, etag, body}` (body parsed when JSON). Throws on network failure only. */
  async request(method, path, { body, headers = {}, signal } = {}) {
    const init = { method, headers: this.headers(headers), signal, cache: "no-store" };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch(path, init);
    const type = response.headers.get("Content-Type") || "";
    const parsed = type.includes("json") ? await response.json().catch(() => null) : null;
    if (response.status === 401 && this.onUnauthorized) this.onUnauthorized(new ApiError(401, parsed));
    return { status: response.status, etag: response.headers.get("ETag"), body: parsed };
  }

  /** A GET that must succeed: its body, or an ApiError. */
  async get(path, options) {
    const r = await this.request("GET", path, options);
    if (r.status < 200 || r.status > 299) throw new ApiError(r.status, r.body);
    return r.body;
  }

  /** Every item of a list, following `meta.last_page` (at most `maxPages` pages). */
  async all(path, { pageSize = 100, maxPages = 50, signal } = {}) {
    const items = [];
    const join = path.includes("?") ? "&" : "?";
    for (let page = 1; page <= maxPages; page++) {
      const body = await this.get(`${path}${join}pageSize=${pageSize}&page=${page}`, { signal });
      items.push(...body.data);
      if (page >= body.meta.last_page) break;
    }
    return items;
  }
}

/** Query-string value, brackets and all. */
export function q(value) {
  return encodeURIComponent(value);
}
