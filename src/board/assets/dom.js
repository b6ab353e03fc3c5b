// Small DOM helpers (text only: nothing from the API is ever parsed as HTML) and the two message
// regions.

const NOTICE_MS = 6000;

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "style") for (const [p, v] of Object.entries(value)) node.style.setProperty(p, v);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

let noticeTimer = null;
let alertTimer = null;

export function notice(text) {
  const n = $("notice");
  n.textContent = text;
  clearTimeout(noticeTimer);
  if (text) noticeTimer = setTimeout(() => (n.textContent = ""), NOTICE_MS);
}

/** An error or conflict message; `status` (when an HTTP status caused it) is kept for tests and support. */
export function alertMessage(text, status) {
  const a = $("alert");
  if (text) notice("");
  a.textContent = text;
  if (status) a.dataset.status = String(status);
  else delete a.dataset.status;
  clearTimeout(alertTimer);
  if (text) alertTimer = setTimeout(() => (a.textContent = ""), 15000);
}
