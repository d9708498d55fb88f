// The one DOM builder every page module shares. It lives apart from render.js so that modules render.js
// itself imports (toolviews.js) can build nodes without an import cycle.

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}
