// An action shown as done at once but committed only after an undo window: Undo cancels it, and
// anything that depends on it (sending, another command, switching sessions) commits it first.

export class PendingAction {
  constructor({ commit, undo, delayMs }) {
    this.commitFn = commit;
    this.undoFn = undo;
    this.state = "pending";
    this.timer = setTimeout(() => this.flush(), delayMs);
  }

  // Commits now if still pending; resolves when the commit is done.
  async flush() {
    if (this.state !== "pending") return this.result;
    this.state = "committed";
    clearTimeout(this.timer);
    this.result = this.commitFn();
    return this.result;
  }

  undo() {
    if (this.state !== "pending") return false;
    this.state = "undone";
    clearTimeout(this.timer);
    this.undoFn();
    return true;
  }

  // Neither commits nor undoes: what it acted on is gone (deleted in another tab).
  drop() {
    if (this.state !== "pending") return false;
    this.state = "dropped";
    clearTimeout(this.timer);
    return true;
  }
}
