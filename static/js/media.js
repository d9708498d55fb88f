// Images of the session's workspace: the server renders them as <img data-media="relative/path"> with
// no source, and the page points them at the media route of the session it shows (which checks the
// path stays inside that session's workspace).

export function mediaUrl(sessionId, path) {
  return `/api/media?session_id=${encodeURIComponent(sessionId)}&path=${encodeURIComponent(path)}`;
}

// An image the server refuses (outside the workspace, missing, not an image) becomes a quiet note.
function unavailable(img) {
  const note = document.createElement("span");
  note.className = "media-missing";
  note.textContent = `[image not available: ${img.alt || img.dataset.media}]`;
  img.replaceWith(note);
}

export function hydrateMedia(root, sessionId) {
  if (!sessionId) return;
  for (const img of root.querySelectorAll("img[data-media]:not([src])")) {
    img.loading = "lazy";
    img.decoding = "async";
    img.addEventListener("error", () => unavailable(img), { once: true });
    img.src = mediaUrl(sessionId, img.dataset.media);
  }
}
