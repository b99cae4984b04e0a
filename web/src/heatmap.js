// Draws an attention matrix on a canvas: one row per output piece, one column
// per source piece, darker = more weight (each row sums to 1 over the source).

const CELL = 26; // CSS pixels per cell
const FONT = "12px system-ui, sans-serif";

function measure(context, labels) {
  context.font = FONT;
  return Math.ceil(Math.max(0, ...labels.map((label) => context.measureText(label).width)));
}

/**
 * @param {HTMLCanvasElement} canvas
 * @param {Float32Array[]} weights rows (outputs) of columns (source positions)
 * @param {string[]} sourcePieces column labels
 * @param {string[]} outputPieces row labels
 */
export function drawHeatmap(canvas, weights, sourcePieces, outputPieces) {
  const context = canvas.getContext("2d");
  const left = measure(context, outputPieces) + 12;
  const top = measure(context, sourcePieces) + 12;
  const width = left + CELL * sourcePieces.length + 4;
  const height = top + CELL * outputPieces.length + 4;
  const scale = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * scale);
  canvas.height = Math.round(height * scale);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  context.setTransform(scale, 0, 0, scale, 0, 0);
  context.clearRect(0, 0, width, height);
  context.font = FONT;
  context.fillStyle = "#222";
  context.textBaseline = "middle";

  context.textAlign = "right";
  outputPieces.forEach((piece, row) => {
    context.fillText(piece, left - 6, top + CELL * row + CELL / 2);
  });
  sourcePieces.forEach((piece, column) => {
    context.save();
    context.translate(left + CELL * column + CELL / 2, top - 6);
    context.rotate(-Math.PI / 2);
    context.textAlign = "left";
    context.fillText(piece, 0, 0);
    context.restore();
  });

  weights.forEach((row, r) => {
    row.forEach((weight, c) => {
      const w = Math.min(1, Math.max(0, weight));
      // White (0) to dark blue (1).
      const red = Math.round(255 - 230 * w);
      const green = Math.round(255 - 190 * w);
      const blue = Math.round(255 - 100 * w);
      context.fillStyle = `rgb(${red}, ${green}, ${blue})`;
      context.fillRect(left + CELL * c, top + CELL * r, CELL - 1, CELL - 1);
    });
  });
}

/** Empties the canvas (no translation shown). */
export function clearHeatmap(canvas) {
  canvas.width = 0;
  canvas.height = 0;
  canvas.style.width = "0px";
  canvas.style.height = "0px";
}
