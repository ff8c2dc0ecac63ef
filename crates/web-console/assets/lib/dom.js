// Building the page: elements made with createElement and textContent (no
// data ever goes through innerHTML), and the formats numbers, sizes and
// times are shown in.

// ---------------------------------------------------------------- helpers

/** Builds an element: h('a', {href, class, onclick}, child, ...). */
export function h(tag, props, ...children) {
  const el = tag === 'svg' || SVG_TAGS.has(tag)
    ? document.createElementNS('http://www.w3.org/2000/svg', tag)
    : document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith('on') && typeof value === 'function') {
        el.addEventListener(key.slice(2), value);
      } else if (key === 'class') {
        el.setAttribute('class', value);
      } else if (key === 'text') {
        el.textContent = value;
      } else if (key === 'dataset') {
        for (const [k, v] of Object.entries(value)) el.dataset[k] = v;
      } else if (key === 'value' && 'value' in el && !(el instanceof SVGElement)) {
        el.value = value;
      } else if (key === 'checked' || key === 'disabled' || key === 'hidden' || key === 'required') {
        el[key] = Boolean(value);
      } else {
        el.setAttribute(key, value === true ? '' : String(value));
      }
    }
  }
  append(el, children);
  return el;
}
export const SVG_TAGS = new Set(['g', 'path', 'line', 'rect', 'circle', 'text', 'title', 'polyline', 'defs', 'linearGradient', 'stop', 'desc']);

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Sets text only when it changed (live updates keep selections intact). */
export function setText(el, text) {
  const value = String(text);
  if (el.textContent !== value) el.textContent = value;
}

let idCounter = 0;
export function uid(prefix) {
  idCounter += 1;
  return `${prefix}-${idCounter}`;
}

export const numberFormat = new Intl.NumberFormat('en');
export function fmtNumber(n) {
  return n === null || n === undefined || Number.isNaN(n) ? '—' : numberFormat.format(n);
}

export function fmtBytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function fmtRate(r) {
  if (!r) return '0';
  if (r >= 100) return numberFormat.format(Math.round(r));
  if (r >= 10) return r.toFixed(0);
  return r.toFixed(1);
}

export function fmtTime(date) {
  return date.toLocaleTimeString('en-GB', { hour12: false });
}

export function fmtAgo(iso) {
  if (!iso) return '—';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return String(iso);
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t).toLocaleString('en-GB');
}

export function shortSeq(seq) {
  if (seq === null || seq === undefined) return '—';
  const text = typeof seq === 'string' ? seq : JSON.stringify(seq);
  const n = text.split('-')[0];
  return /^\d+$/.test(n) ? fmtNumber(Number(n)) : text;
}

/** A URL (or any text holding URLs) with passwords removed from userinfo. */
export function stripCredentials(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') {
    return stripCredentials(value.url || JSON.stringify(value));
  }
  return String(value).replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@]*)@/gi, (_, scheme, userinfo) => {
    const name = userinfo.split(':')[0];
    return name ? `${scheme}${name}@` : scheme;
  });
}
