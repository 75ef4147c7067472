// A tiny markdown renderer that builds DOM nodes. Model text only ever
// becomes text nodes (createTextNode / textContent), never markup: no
// string is parsed as HTML anywhere in the console. Supported: paragraphs
// (single line breaks kept), **bold**, *italic* / _italic_, `code`, fenced
// code blocks, "-", "*", "+" and "1." lists, "#" headings, and
// [links](https://…) for http and https URLs only (anything else stays text).

const FENCE = /^\s*(```|~~~)\s*([\w+-]*)\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const ORDERED = /^\s*(\d{1,9})[.)]\s+(.*)$/;
const HEADING = /^(#{1,6})\s+(.*)$/;

/** Renders `text` into a DocumentFragment. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end of a reply still streaming)
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (fence[2]) code.dataset.lang = fence[2];
      code.textContent = body.join("\n");
      pre.append(code);
      fragment.append(pre);
      continue;
    }
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = Math.min(6, heading[1].length + 2);
      const h = document.createElement(`h${level}`);
      h.append(renderInline(heading[2]));
      fragment.append(h);
      i += 1;
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      const ordered = !BULLET.test(line);
      const list = document.createElement(ordered ? "ol" : "ul");
      const start = ordered ? Number(ORDERED.exec(line)[1]) : 1;
      if (ordered && start !== 1) list.start = start;
      while (i < lines.length) {
        const match = ordered ? ORDERED.exec(lines[i]) : BULLET.exec(lines[i]);
        if (!match) break;
        const item = document.createElement("li");
        item.append(renderInline(ordered ? match[2] : match[1]));
        list.append(item);
        i += 1;
      }
      fragment.append(list);
      continue;
    }
    const paragraph = [];
    while (
      i < lines.length &&
      lines[i].trim() &&
      !FENCE.test(lines[i]) &&
      !HEADING.test(lines[i]) &&
      !BULLET.test(lines[i]) &&
      !ORDERED.test(lines[i])
    ) {
      paragraph.push(lines[i]);
      i += 1;
    }
    const p = document.createElement("p");
    paragraph.forEach((text, n) => {
      if (n > 0) p.append(document.createElement("br"));
      p.append(renderInline(text));
    });
    fragment.append(p);
  }
  return fragment;
}

/** An http(s) URL as a string, or null for any other scheme or a bad URL. */
export function safeHttpUrl(raw) {
  try {
    const url = new URL(raw, document.baseURI);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

/** A link that opens in a new tab without handing it this window. */
export function externalLink(href, label) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  a.textContent = label;
  return a;
}

/** Inline markdown of one line, as a DocumentFragment. */
export function renderInline(text) {
  const out = document.createDocumentFragment();
  let plain = "";
  const flush = () => {
    if (plain) out.append(document.createTextNode(plain));
    plain = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length && /[\\`*_[\]()#+\-.!]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const end = text.indexOf("`", i + 1);
      if (end > i + 1) {
        flush();
        const code = document.createElement("code");
        code.textContent = text.slice(i + 1, end);
        out.append(code);
        i = end + 1;
        continue;
      }
    }
    if (text.startsWith("**", i) || text.startsWith("__", i)) {
      const marker = text.slice(i, i + 2);
      const end = text.indexOf(marker, i + 2);
      if (end > i + 2) {
        flush();
        const strong = document.createElement("strong");
        strong.append(renderInline(text.slice(i + 2, end)));
        out.append(strong);
        i = end + 2;
        continue;
      }
    }
    if ((c === "*" || c === "_") && text[i + 1] && text[i + 1] !== " " && text[i + 1] !== c) {
      const end = findClosing(text, c, i + 1);
      // `_` only at word boundaries, so snake_case_names stay as they are.
      const wordy = c === "_" && (/\w/.test(text[i - 1] ?? "") || /\w/.test(text[end + 1] ?? ""));
      if (end > i + 1 && !wordy) {
        flush();
        const em = document.createElement("em");
        em.append(renderInline(text.slice(i + 1, end)));
        out.append(em);
        i = end + 1;
        continue;
      }
    }
    if (c === "[") {
      const link = /^\[([^\]\n]+)\]\(([^)\s]+)\)/.exec(text.slice(i));
      if (link) {
        const href = /^https?:\/\//i.test(link[2]) ? safeHttpUrl(link[2]) : null;
        if (href) {
          flush();
          out.append(externalLink(href, link[1]));
          i += link[0].length;
          continue;
        }
      }
    }
    plain += c;
    i += 1;
  }
  flush();
  return out;
}

function findClosing(text, marker, from) {
  for (let j = from; j < text.length; j += 1) {
    if (text[j] === marker && text[j - 1] !== " " && text[j + 1] !== marker) return j;
  }
  return -1;
}
