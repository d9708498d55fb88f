// Browser notifications: the sidebar's "Notify me" asks the browser's permission (only when clicked),
// then a tab out of sight tells the person when an answer finished or an approval or question waits.
// Tabs of one browser agree through a BroadcastChannel under a Web Lock, so an event notifies once; a
// click on the notification focuses the tab and opens the session.

import { SeenTags, mayNotify, noticeFor } from "./notify_rules.js";

const PREF_KEY = "talaria-notify";
const CHANNEL = "talaria-notify";
// Long enough for the other tabs to hear the broadcast before the lock lets one of them decide.
const HOLD_MS = 300;

export class Notifier {
  constructor({ button, onOpen }) {
    this.button = button;
    this.onOpen = onOpen;
    this.seen = new SeenTags();
    this.supported = typeof window.Notification === "function";
    this.channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(CHANNEL) : null;
    this.channel?.addEventListener("message", (event) => {
      if (typeof event.data?.tag === "string") this.seen.add(event.data.tag);
    });
    navigator.serviceWorker?.addEventListener("message", (event) => {
      if (event.data?.type === "open-session" && event.data.sessionId) this.onOpen(event.data.sessionId);
    });
    button.hidden = !this.supported;
    button.addEventListener("click", () => this.toggle());
    this.paint();
  }

  get enabled() {
    try {
      return localStorage.getItem(PREF_KEY) === "on";
    } catch {
      return false;
    }
  }

  set enabled(on) {
    try {
      if (on) localStorage.setItem(PREF_KEY, "on");
      else localStorage.removeItem(PREF_KEY);
    } catch {
      // storage refused (private mode): notifications stay off
    }
  }

  async toggle() {
    if (!this.supported) return;
    if (Notification.permission === "granted") this.enabled = !this.enabled;
    else if (Notification.permission === "default") {
      this.enabled = (await Notification.requestPermission()) === "granted";
    }
    this.paint();
  }

  paint() {
    if (!this.supported) return;
    const permission = Notification.permission;
    const on = permission === "granted" && this.enabled;
    this.button.textContent = permission === "denied" ? "Notifications blocked" : on ? "Notifying" : "Notify me";
    this.button.title =
      permission === "denied"
        ? "The browser blocks notifications for this page; allow them in its site settings"
        : on
          ? "A hidden tab tells you when an answer is ready or Hermes waits for you; click to stop"
          : "Be told when an answer is ready or Hermes waits for you while this tab is hidden";
    this.button.setAttribute("aria-pressed", String(on));
    this.button.disabled = permission === "denied";
  }

  // A turn event (`done`, `approval`, `clarify`) of session `sessionId`, seen by this tab.
  turnEvent(name, data, context) {
    const notice = noticeFor(name, data, context);
    if (!notice || this.seen.has(notice.tag)) return;
    const allowed = () =>
      this.supported &&
      mayNotify({ permission: Notification.permission, enabled: this.enabled, visibility: document.visibilityState });
    const decide = async () => {
      if (!this.seen.add(notice.tag)) return;
      this.channel?.postMessage({ tag: notice.tag });
      if (allowed()) this.show(notice);
      await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
    };
    if (navigator.locks) navigator.locks.request(CHANNEL, decide).catch(() => {});
    else decide();
  }

  show(notice) {
    const options = { body: notice.body, tag: notice.tag, icon: "/static/icons/icon.svg", data: { sessionId: notice.sessionId } };
    try {
      const shown = new Notification(notice.title, options);
      shown.addEventListener("click", () => {
        window.focus();
        shown.close();
        this.onOpen(notice.sessionId);
      });
    } catch {
      // Phones allow notifications only through the service worker; its click handler opens the session.
      navigator.serviceWorker?.ready.then((reg) => reg.showNotification(notice.title, options)).catch(() => {});
    }
  }
}

// Installs the service worker that keeps the page's shell for offline starts (static/sw.js).
export function registerShellWorker() {
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => {});
}
