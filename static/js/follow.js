// Following the end of the transcript while an answer streams, only while the reader is there: a
// reader who scrolls up stays where they are, and a "Jump to latest" button brings them back.

const AT_BOTTOM_PX = 32;

export class ScrollFollow {
  constructor(transcript) {
    this.transcript = transcript;
    this.pinned = true;
    this.button = document.createElement("button");
    this.button.type = "button";
    this.button.className = "btn btn-small jump-latest";
    this.button.textContent = "↓ Jump to latest";
    this.button.hidden = true;
    this.button.addEventListener("click", () => this.jump());
    transcript.append(this.button);
    // Only a reader's scroll moves the pin; content growing under a pinned view fires no scroll event.
    transcript.addEventListener("scroll", () => {
      this.pinned = this.distance() <= AT_BOTTOM_PX;
      if (this.pinned) this.button.hidden = true;
    }, { passive: true });
  }

  distance() {
    const t = this.transcript;
    return t.scrollHeight - t.scrollTop - t.clientHeight;
  }

  // New content arrived: keep the end in view when pinned, else offer the button.
  contentChanged() {
    if (this.pinned) this.toBottom();
    else if (this.distance() > AT_BOTTOM_PX) this.button.hidden = false;
  }

  jump() {
    this.pinned = true;
    this.button.hidden = true;
    this.toBottom();
  }

  // Rows off screen have estimated heights (content-visibility), so the end moves as they lay out:
  // scroll again on the next frames, unless the reader has scrolled away meanwhile.
  toBottom() {
    const t = this.transcript;
    t.scrollTop = t.scrollHeight;
    requestAnimationFrame(() => {
      if (!this.pinned) return;
      t.scrollTop = t.scrollHeight;
      requestAnimationFrame(() => {
        if (this.pinned) t.scrollTop = t.scrollHeight;
      });
    });
  }
}
