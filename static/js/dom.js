// The one DOM builder every page module shares. It lives apart from render.js so that modules render.js
// itself imports (toolviews.js) can build nodes without an import cycle.

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

// A small line icon (16×16 view box) drawn by one path, hidden from assistive technology.
export function pathIcon(className, d) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", className);
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", d);
  svg.append(path);
  return svg;
}

// A small button that runs onClick; kind adds a class (btn-danger).
export function button(label, onClick, kind = "") {
  const node = el("button", `btn btn-small${kind ? ` ${kind}` : ""}`, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}
