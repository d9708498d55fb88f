// Following the end of the transcript while an answer streams, only while the reader is there: a
// reader who scrolls up stays where they are, and a "Jump to latest" button brings them back.

const AT_BOTTOM_PX = 32;
// A scroll this soon after the reader's input is theirs.
const USER_SCROLL_MS = 1000;
// Frames to keep at the end while rows above settle their heights.
const SETTLE_FRAMES = 8;

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
    // Only the reader unpins (wheel, touch, keys, scrollbar): the page's own scrolls, and rows that
    // change height as they lay out, never do. Reaching the end pins again.
    this.lastInput = 0;
    const noteInput = () => {
      this.lastInput = performance.now();
    };
    for (const type of ["wheel", "touchmove", "keydown", "mousedown"]) {
      transcript.addEventListener(type, noteInput, { passive: true });
    }
    this.lastTop = transcript.scrollTop;
    transcript.addEventListener("scroll", () => {
      const top = transcript.scrollTop;
      // A jump up by half a screen is a reader's too (a script, a scrollbar drag): rows settling
      // their heights never move the view that far.
      const bigJumpUp = top < this.lastTop - transcript.clientHeight / 2;
      this.lastTop = top;
      if (this.distance() <= AT_BOTTOM_PX) {
        this.pinned = true;
        this.button.hidden = true;
      } else if (bigJumpUp || performance.now() - this.lastInput < USER_SCROLL_MS) {
        this.pinned = false;
      }
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
    this.lastTop = t.scrollTop;
    let frames = SETTLE_FRAMES;
    const again = () => {
      if (!this.pinned || frames-- <= 0) return;
      t.scrollTop = t.scrollHeight;
      this.lastTop = t.scrollTop;
      requestAnimationFrame(again);
    };
    requestAnimationFrame(again);
  }
}
