// Bootstrap: login when auth is on, then wire the sidebar, chat view and composer together, route by
// the URL hash (#/s/<session id>), and handle keyboard shortcuts.

import { api, setCsrfToken } from "./api.js";
import { AttachmentTray } from "./attachments.js";
import { ChatView } from "./chat.js";
import { UndoableClear } from "./clear_undo.js";
import { findCommand, loadAgentCommands, refusal } from "./commands.js";
import { Composer } from "./composer.js";
import { DraftKeeper } from "./drafts.js";
import { followRow } from "./freshness.js";
import { applyEdit, branchAt, switchVersion } from "./history_actions.js";
import { showLogin } from "./login.js";
import { showLineage } from "./lineage.js";
import { showRecoveryBanner, updateContextMeter } from "./markers.js";
import { ModelPicker } from "./model_picker.js";
import { Notifier, registerShellWorker } from "./notify.js";
import { QueuePanel } from "./queue.js";
import { showRecoveryReport } from "./recovery.js";
import { showCommands, showShortcuts } from "./shortcuts.js";
import { FilesPanel } from "./files_panel.js";
import { LiveFiles } from "./live_files.js";
import { ReasoningPicker } from "./reasoning_picker.js";
import { openToolbox } from "./toolbox.js";
import { messageText } from "./render.js";
import { SessionList } from "./sessions.js";
import { ProjectPanel } from "./projects.js";
import { Selection } from "./bulk_select.js";
import { TurnChanges } from "./turn_changes.js";
import { SetupDialog } from "./setup.js";
import { toast, toastError } from "./toast.js";
import { WorkspacePicker } from "./workspace.js";
import { EnvironmentPicker, confirmEnvironment } from "./environment.js";
import { YoloIndicator } from "./questions.js";
import { ToolsMenu } from "./tools.js";

const $ = (id) => document.getElementById(id);
// How long /clear can be undone before it reaches the server.
function sessionFromHash() {
  const match = /^#\/s\/([A-Za-z0-9_-]{1,200})$/.exec(location.hash);
  return match ? match[1] : null;
}

// The session whose turns' changes are listed (a session only read has none): each turn's changes come from
// its checkpoints, kept on this machine or, for a session in another environment, on that host.
function changesOf(session) {
  return session && !session.read_only ? session.session_id || null : null;
}

class App {
  constructor(authStatus) {
    this.auth = authStatus;
    this.loading = null; // the session being opened, if any
    this.sessions = new SessionList({
      root: $("session-list"),
      filterInput: $("session-filter"),
      archivedToggle: $("show-archived"),
      onOpen: (sid, opts) => this.open(sid, opts),
      onDeleted: (sid) => {
        this.drafts.forget(sid);
        if (sid === this.chat.sessionId) this.goEmpty();
      },
      onChanged: (row) => this.sessionChanged(row),
      // A change made elsewhere (a rename, a model, workspace, pin or archive from another tab, the title
      // the model gave after the first exchange): the header follows the open session's newest row.
      onFeedChanged: (row) => this.followFeed(row),
      onFeedRemoved: (sid) => this.removedElsewhere(sid),
      onTurnEnded: (row, streamId) =>
        this.notifier.turnEvent("done", {}, { sessionId: row.session_id, streamId, title: row.title }),
    });
    this.projects = new ProjectPanel({
      root: $("projects"),
      onView: (projectId, { refresh = true } = {}) =>
        refresh ? this.sessions.setProject(projectId).catch(toastError) : this.sessions.render(),
      onDrop: (ids, project) =>
        this.sessions.selection.run("move", { project_id: project?.project_id ?? null }, project?.name ?? null, ids),
    });
    this.sessions.projects = this.projects;
    this.sessions.selection = new Selection({
      scope: $("sidebar"),
      bar: $("bulk-bar"),
      button: $("select-sessions"),
      shownIds: () => this.sessions.shown,
      changed: () => this.sessions.render(),
      send: (body) => this.sessions.sendBulk(body),
      chooseTarget: (title) => this.projects.chooseTarget(title),
    });
    this.notifier = new Notifier({ button: $("notify-toggle"), onOpen: (sid) => this.open(sid) });
    this.chat = new ChatView({
      transcript: $("transcript"),
      list: $("messages"),
      sentinel: $("older-sentinel"),
      empty: $("empty-state"),
      onSession: (session) => this.onSession(session),
      onStreaming: (streaming) => {
        this.composer.setStreaming(streaming);
        if (streaming) return;
        this.files?.turnEnded();
        this.turnChanges.refresh(changesOf(this.chat.session));
      },
      onAction: (action, msg) => this.messageAction(action, msg),
      onError: toastError,
      onRendered: () => this.turnChanges?.decorate(),
      onTool: (name, data) => this.liveFiles.event(name, data, this.files.workspaceRoot || this.chat.session?.workspace),
      onTurnEvent: (name, data, context) =>
        this.notifier.turnEvent(name, data, { ...context, title: this.sessions.find(context.sessionId)?.title }),
      onQueue: (items) => this.queue.show(items),
    });
    this.clears = new UndoableClear(this.chat, { onGone: (sid) => this.removedElsewhere(sid) });
    this.queue = new QueuePanel({
      root: $("queue-panel"),
      onEdit: (id, text) => this.queueChange(() => api.queueEdit(this.chat.sessionId, id, text)),
      onCancel: (id) => this.queueChange(() => api.queueCancel(this.chat.sessionId, id)),
    });
    this.turnChanges = new TurnChanges({
      list: $("messages"),
      messages: () => this.chat.messages,
      onRestored: () => {
        this.files.reload();
        this.turnChanges.refresh(changesOf(this.chat.session));
      },
    });
    this.liveFiles = new LiveFiles((path) => this.files.agentWrote(path));
    this.composer = new Composer({
      form: $("composer"),
      input: $("composer-input"),
      sendButton: $("send"),
      stopButton: $("stop"),
      queueGroup: $("queue-group"),
      list: $("slash-list"),
      editNote: $("edit-note"),
      editCancel: $("edit-cancel"),
      status: $("composer-status"),
      onSend: (text, opts) => this.send(text, opts),
      onCommand: (name, arg) => this.command(name, arg),
      onStop: () => this.stop(),
    });
    this.drafts = new DraftKeeper($("composer-input"), { isEditing: () => this.composer.editing !== null });
    this.workspace = new WorkspacePicker({ root: $("workspace-picker"), onChanged: (row) => this.sessionChanged(row) });
    this.environment = new EnvironmentPicker({ root: $("environment-picker"), onChanged: (row) => this.sessionChanged(row) });
    this.workspace.menu.append(this.environment.shortcut);
    this.yolo = new YoloIndicator($("yolo-indicator"));
    this.setup = new SetupDialog({ onSaved: () => this.modelPicker.load() });
    this.modelPicker = new ModelPicker({
      root: $("model-picker"),
      select: $("model-select"),
      refreshButton: $("model-refresh"),
      onChanged: (row) => this.sessionChanged(row),
      onSetup: () => this.setup.open(),
    });
    this.files = new FilesPanel({ app: this, panel: $("files-panel"), toggle: $("files-toggle") });
    this.reasoning = new ReasoningPicker({ root: $("reasoning-picker"), select: $("reasoning-select") });
    this.tools = new ToolsMenu({
      menu: $("tools-menu"),
      summary: $("tools-summary"),
      list: $("tools-list"),
      resetButton: $("tools-reset"),
    });
    this.attachments = new AttachmentTray({
      form: $("composer"),
      input: $("composer-input"),
      dropZone: document.querySelector(".main"),
      ensureSession: () => this.ensureSession(),
    });
    $("new-session").addEventListener("click", () => this.newSession());
    $("open-toolbox").addEventListener("click", () => openToolbox());
    $("open-sidebar").addEventListener("click", () => this.toggleSidebar(true));
    $("close-sidebar").addEventListener("click", () => this.toggleSidebar(false));
    $("scrim").addEventListener("click", () => this.toggleSidebar(false));
    $("logout").hidden = !authStatus.enabled;
    $("logout").addEventListener("click", async () => {
      await api.logout().catch(() => {});
      location.reload();
    });
    const exportMenu = $("export-menu");
    exportMenu.addEventListener("click", (event) => {
      if (event.target.closest("a")) exportMenu.open = false;
    });
    document.addEventListener("click", (event) => {
      if (exportMenu.open && !exportMenu.contains(event.target)) exportMenu.open = false;
    });
    window.addEventListener("hashchange", () => this.route());
    document.addEventListener("keydown", (event) => this.shortcut(event));
  }

  start() {
    return this.track(this.startApp());
  }

  async startApp() {
    $("app").hidden = false;
    this.projects.load().then(() => this.sessions.render());
    await this.sessions.refresh();
    this.modelPicker.load();
    // The page's own commands work without the agent's; a completion list already open takes them when they come.
    loadAgentCommands()
      .then(() => this.composer.refreshCompletions())
      .catch(() => {});
    this.setup.offerIfNeeded();
    const titleOf = (sid) => this.sessions.find(sid)?.title;
    api
      .recoveryStartup()
      .then((summary) =>
        showRecoveryBanner($("recovery-banner"), summary, () => showRecoveryReport(titleOf).catch(toastError), titleOf),
      )
      .catch(() => {});
    await this.route();
  }

  async route() {
    const sid = sessionFromHash();
    if (!sid) return this.goEmpty();
    if (sid !== this.chat.sessionId) await this.load(sid);
  }

  async open(sid, opts = {}) {
    this.toggleSidebar(false);
    // Re-opening the session whose answer is streaming would only restart the stream.
    if (sid === this.chat.sessionId && this.chat.streaming && opts.messageIdx === undefined) return;
    if (sessionFromHash() !== sid) history.pushState(null, "", `#/s/${sid}`);
    await this.load(sid, opts);
  }

  load(sid, opts = {}) {
    return this.track(this.loadSession(sid, opts));
  }

  // Remembers what is opening, so a send made meanwhile waits for it (see ensureSession).
  track(loading) {
    this.loading = loading;
    const settle = () => {
      if (this.loading === loading) this.loading = null;
    };
    loading.then(settle, settle);
    return loading;
  }

  async loadSession(sid, opts) {
    await this.clears.flush();
    this.sessions.setCurrent(sid);
    try {
      await this.chat.open(sid, opts);
    } catch (err) {
      if (err.status === 404) {
        toast("That session no longer exists.");
        history.replaceState(null, "", location.pathname);
        this.goEmpty();
      } else {
        toastError(err);
      }
    }
  }

  goEmpty() {
    this.chat.showEmpty();
    this.sessions.setCurrent(null);
    if (location.hash) history.replaceState(null, "", location.pathname);
  }

  onSession(session) {
    this.queue.show(session?.read_only ? [] : session?.queued_messages);
    this.drafts.open(session);
    if (session && !session.read_only && session.session_id) {
      this.sessions.upsert(session);
      // The sidebar keeps the newest copy of the row: an answer older than it shows the row's header fields.
      const followed = followRow(session, this.sessions.find(session.session_id));
      if (followed !== session && this.chat.sessionId === session.session_id) this.chat.session = followed;
      session = followed;
    }
    this.updateHeader(session);
  }

  followFeed(row) {
    if (!row || !this.chat.session || row.session_id !== this.chat.sessionId) return;
    this.chat.followElsewhere(row);
    const followed = followRow(this.chat.session, row);
    if (followed === this.chat.session) return;
    this.chat.session = followed;
    this.updateHeader(followed);
  }

  // The open session was deleted in another tab: leave it as a delete here does, keeping an unsent message
  // in the composer (it goes to a new session if sent). Its undo, while it lasts, is in the tab that deleted it.
  removedElsewhere(sid) {
    this.clears.dropFor(sid);
    this.drafts.forget(sid);
    if (sid !== this.chat.sessionId) return;
    const draft = this.composer.draft();
    this.composer.cancelEdit({ keepText: true });
    this.goEmpty();
    toast(
      draft
        ? "This conversation was deleted in another tab. Your unsent message is still in the box; sending it starts a new conversation."
        : "This conversation was deleted in another tab.",
      { timeout: 0 },
    );
  }

  updateHeader(session) {
    const title = session ? session.title || "Untitled" : "Talaria";
    $("chat-title").textContent = title;
    document.title = session ? `${title} — Talaria` : "Talaria";
    updateContextMeter($("context-meter"), session);
    this.workspace.setSession(session);
    this.environment.setSession(session);
    this.yolo.setSession(session);
    this.modelPicker.update(session);
    this.reasoning.update(session);
    this.files.update(session);
    const changes = changesOf(session);
    if (changes !== this.turnChanges.sessionId) this.turnChanges.refresh(changes);
    this.tools.update(session);
    const sid = session && (session.session_id || session.id);
    const exportable = Boolean(sid && !session.read_only);
    $("export-menu").hidden = !exportable;
    if (exportable) {
      for (const format of ["json", "md", "html"]) $(`export-${format}`).href = api.exportUrl(sid, format);
    }
    showLineage(session, this.sessions);
    const note = $("read-only-note");
    note.hidden = !(session && session.read_only);
    if (session && session.read_only) {
      note.textContent = `This conversation comes from ${session.source || "another platform"}. Sending a message continues it here with its whole history; the agent's copy stays as it is.`;
    }
    this.composer.setEnabled(true, session && session.read_only ? "Continue this conversation here…" : undefined);
  }

  // A control changed a session's row (its model, workspace, pin...): keep the chat view's copy in step,
  // unless the feed already brought a newer change of the same fields.
  sessionChanged(row) {
    if (!row) return;
    this.sessions.upsert(row);
    if (this.chat.session && row.session_id === this.chat.sessionId) {
      this.chat.session = followRow({ ...this.chat.session, ...row }, this.sessions.find(row.session_id));
      this.updateHeader(this.chat.session);
    }
  }

  async newSession() {
    try {
      const data = await api.newSession();
      this.sessions.upsert(data.session);
      await this.open(data.session.session_id);
      this.composer.focus();
    } catch (err) {
      toastError(err);
    }
  }

  async ensureSession() {
    // A message sent while the URL's session is still loading belongs to that session, not a new one.
    if (this.loading) await this.loading;
    if (this.chat.readOnly) return this.continueAgentSession(this.chat.sessionId);
    if (this.chat.sessionId) return this.chat.sessionId;
    const data = await api.newSession();
    this.sessions.upsert(data.session);
    await this.open(data.session.session_id);
    return data.session.session_id;
  }

  // The first message sent in one of the agent's own conversations continues it in a Talaria session
  // holding its whole history; the agent's copy stays as it is.
  async continueAgentSession(agentId) {
    const data = await api.importAgentSession(agentId);
    this.sessions.continued(agentId, data.session);
    await this.open(data.session.session_id);
    return data.session.session_id;
  }

  messageAction(action, msg) {
    if (action === "edit") {
      this.composer.startEdit(msg, messageText(msg));
      $("edit-note").querySelector("span").textContent =
        msg._idx === this.chat.lastUserIdx() ? "Editing your last message" : "Editing an earlier message";
    } else if (action === "regenerate") {
      this.command("retry");
    } else if (action === "retry") {
      // The last turn is cut and sent again; an earlier failed message is sent again as a new one.
      const user = this.chat.turnUser(msg);
      if (user && user._idx === this.chat.lastUserIdx()) this.command("retry");
      else if (user) this.send(messageText(user));
    } else if (action === "branch") {
      this.branch(msg._idx + 1);
    } else if (action === "version-prev" || action === "version-next") {
      this.switchVersion(msg, action === "version-prev" ? -1 : 1);
    }
  }

  switchVersion(msg, step) {
    return switchVersion(this, msg, step);
  }

  branch(keepCount) {
    return branchAt(this, keepCount);
  }

  // Sends a message (after replacing or branching at an edited message).
  async send(text, { editIdx = null, mode } = {}) {
    await this.clears.flush();
    if (this.chat.streaming) return this.sendDuringTurn(text, mode || "queue");
    try {
      let sid = await this.ensureSession();
      if (editIdx !== null && editIdx !== undefined) {
        sid = await applyEdit(this, sid, editIdx);
        if (!sid) return false;
      }
      if (this.attachments.busy) {
        toast("Wait for the attachments to finish uploading.");
        return false;
      }
      const attached = this.attachments.paths();
      this.chat.appendUserBubble(text);
      this.chat.starting = true;
      this.drafts.sent();
      const started = await api.chatStart(sid, text, attached);
      this.attachments.clear();
      this.chat.follow(started.stream_id);
      return true;
    } catch (err) {
      this.chat.dropPending();
      if (err.status === 409 && err.data?.stream_id) this.offerToFollow(err.data.stream_id);
      else if (err.status === 409 && err.data?.needs_confirmation) return this.confirmThenSend(err.data.needs_confirmation, text);
      else toastError(err);
      return false;
    } finally {
      this.chat.starting = false;
    }
  }

  // A turn in a remote environment whose target the person has not accepted yet: the confirmation of what the
  // agent copies there comes first, then the message is sent again (nothing was saved by the refused one).
  async confirmThenSend(name, text) {
    if (!(await confirmEnvironment(name))) return false;
    return this.send(text);
  }

  // A message sent while the answer streams: queued, steered into the turn, or sent after stopping it.
  async sendDuringTurn(text, mode) {
    const sid = this.chat.sessionId;
    if (this.attachments.busy) {
      toast("Wait for the attachments to finish uploading.");
      return false;
    }
    try {
      const answer = await api.queueSend(sid, text, mode, this.attachments.paths());
      this.attachments.clear();
      if (answer.note) toast(answer.note);
      if (sid === this.chat.sessionId) this.queue.show(answer.queue);
      return true;
    } catch (err) {
      toastError(err);
      return false;
    }
  }

  async queueChange(request) {
    const sid = this.chat.sessionId;
    try {
      const answer = await request();
      if (sid === this.chat.sessionId) this.queue.show(answer.queue);
      return true;
    } catch (err) {
      toastError(err);
      return false;
    }
  }

  // A turn started in another tab or window is still answering: say so, and offer to show it here.
  offerToFollow(streamId) {
    const sid = this.chat.sessionId;
    toast("A reply is still streaming in this conversation, started in another tab or window. Your message is still in the box.", {
      action: "Follow it",
      timeout: 10000,
      onAction: () => {
        if (this.chat.sessionId === sid && this.chat.streamId !== streamId) return this.chat.attach(streamId);
        return null;
      },
    });
  }

  async stop() {
    try {
      await this.chat.stop();
    } catch (err) {
      toastError(err);
    }
  }

  clearUndoably(sid) {
    return this.clears.start(sid);
  }

  // A slash command from the composer or a message's action: its handler lives in commands.js.
  async command(name, arg) {
    await this.clears.flush();
    const command = findCommand(name);
    const sid = this.chat.sessionId;
    const refused = refusal(command, { sessionId: sid, streaming: this.chat.streaming });
    if (refused) {
      toast(refused);
      return false;
    }
    try {
      return await command.run(this, sid, arg);
    } catch (err) {
      toastError(err);
      return false;
    } finally {
      this.composer.setStatus("");
    }
  }

  pickModel(name) {
    return this.modelPicker.pickByName(name);
  }

  async showHelp() {
    await showCommands();
    return true;
  }

  toggleSidebar(open) {
    $("app").classList.toggle("sidebar-open", open);
    $("scrim").hidden = !open;
    if (open) $("close-sidebar").focus();
  }

  shortcut(event) {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName);
    if (event.altKey && event.shiftKey && event.code === "KeyN") {
      event.preventDefault();
      this.newSession();
    } else if ((event.ctrlKey || event.metaKey) && !event.shiftKey && event.key.toLowerCase() === "k") {
      event.preventDefault();
      this.toggleSidebar(window.matchMedia("(max-width: 760px)").matches);
      this.sessions.focusFilter();
    } else if (event.key === "/" && !typing) {
      event.preventDefault();
      this.sessions.focusFilter();
    } else if (event.key === "?" && !typing && !document.querySelector("dialog[open]")) {
      event.preventDefault();
      showShortcuts();
    } else if (event.key === "Escape" && this.chat.streaming) {
      event.preventDefault();
      this.stop();
    } else if (event.key === "Escape" && $("app").classList.contains("sidebar-open")) {
      this.toggleSidebar(false);
    }
  }
}

async function boot() {
  registerShellWorker();
  let status;
  try {
    status = await api.authStatus();
  } catch (err) {
    $("boot").textContent = `Talaria cannot reach its server: ${err.message}`;
    return;
  }
  $("boot").hidden = true;
  const startApp = async (csrfToken) => {
    setCsrfToken(csrfToken);
    $("login").hidden = true;
    const app = new App(status);
    window.addEventListener("talaria:auth-required", () => {
      $("app").hidden = true;
      showLogin(() => location.reload());
    });
    await app.start();
  };
  if (status.enabled && !status.logged_in) showLogin(startApp);
  else await startApp(status.csrf_token);
}

boot();
