// The installed app's service worker: keeps the page's shell (index, modules, styles, icons) in a cache
// named for the shell's version, and answers those files from it when the server cannot be reached.
// Nothing else passes through it: no /api/ request and no conversation is ever cached or answered here.
// The server prepends `self.TALARIA_SHELL = { version, urls }` (api/app_shell.py).

const SHELL = self.TALARIA_SHELL || { version: "none", urls: [] };
const PREFIX = "talaria-shell-";
const CACHE = `${PREFIX}${SHELL.version}`;
const URLS = new Set(SHELL.urls);

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL.urls.map((url) => new Request(url, { cache: "no-cache" }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((n) => n.startsWith(PREFIX) && n !== CACHE).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const { request } = event;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin || !URLS.has(url.pathname)) return;
  // The network first: while the server answers, the page is always the one it serves (never a shell older
  // than its API); the cache answers only when it cannot be reached.
  event.respondWith(
    fetch(request).catch(() =>
      caches
        .open(CACHE)
        .then((cache) => cache.match(url.pathname))
        .then((hit) => hit || Promise.reject(new Error("offline and not cached"))),
    ),
  );
});

// A click on a notification the page could only show through the worker (phones): focus a tab of the
// app and open the session there, or open a new one on it.
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const sid = event.notification.data?.sessionId;
  const hash = sid ? `#/s/${sid}` : "";
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((tabs) => {
      const tab = tabs[0];
      if (!tab) return self.clients.openWindow(`/${hash}`);
      tab.postMessage({ type: "open-session", sessionId: sid });
      return tab.focus();
    }),
  );
});
