// Files from the person's computer: their bytes as base64 (what the upload routes take), and a zone that
// takes files dropped on it (marked while they hover over it).

export function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error || new Error("The file cannot be read."));
    reader.readAsDataURL(file);
  });
}

function carriesFiles(event) {
  return [...(event.dataTransfer?.types || [])].includes("Files");
}

// `onDrop(files, event)` gets what was dropped on `zone`; `onOver(event)` hears each move over it and
// `onLeave()` its end, so a part of the zone (a folder) can be marked. A drop handled here goes no further.
export function acceptFileDrops(zone, onDrop, { onOver = () => {}, onLeave = () => {} } = {}) {
  zone.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    zone.classList.add("drop-target");
    onOver(event);
  });
  zone.addEventListener("dragleave", (event) => {
    if (zone.contains(event.relatedTarget)) return;
    zone.classList.remove("drop-target");
    onLeave();
  });
  zone.addEventListener("drop", (event) => {
    const files = [...(event.dataTransfer?.files || [])];
    zone.classList.remove("drop-target");
    onLeave();
    if (!files.length) return;
    event.preventDefault();
    event.stopPropagation();
    onDrop(files, event);
  });
}
