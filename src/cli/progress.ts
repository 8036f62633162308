// A progress bar on stderr: redrawn in place on a terminal (at most ten times a second), a line
// at each quarter otherwise (logs, pipes, tests), so it never floods what is not a terminal.

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export class ProgressBar {
  #done = 0;
  #drawnAt = 0;
  #quarter = -1;
  readonly #tty: boolean;

  constructor(readonly total: number, readonly label: string, readonly stream: ProgressStream = process.stderr) {
    this.#tty = stream.isTTY === true;
  }

  update(done: number): void {
    this.#done = Math.min(done, this.total);
    const now = Date.now();
    if (this.#tty) {
      if (now - this.#drawnAt < 100 && this.#done < this.total) return;
      this.#drawnAt = now;
      this.stream.write(`\r${this.#line()}\x1b[K`);
      return;
    }
    const quarter = this.total === 0 ? 4 : Math.floor((this.#done / this.total) * 4);
    if (quarter > this.#quarter) {
      this.#quarter = quarter;
      this.stream.write(`${this.#line(false)}\n`);
    }
  }

  /** Draws the final state and ends the line. */
  finish(note = ''): void {
    if (this.#tty) this.stream.write(`\r${this.#line(true, note ? note.length + 1 : 0)}${note ? ` ${note}` : ''}\x1b[K\n`);
    else if (note) this.stream.write(`${this.label}: ${note}\n`);
  }

  /** The bar and figures, in the terminal's width less `reserved` columns (at least 10 for the bar). */
  #line(bar = true, reserved = 0): string {
    const pct = this.total === 0 ? 100 : Math.floor((this.#done / this.total) * 100);
    const figures = `${String(pct).padStart(3)}% ${size(this.#done)}/${size(this.total)}`;
    if (!bar) return `${this.label}: ${figures}`;
    const width = Math.max(10, Math.min(40, (this.stream.columns ?? 80) - this.label.length - figures.length - 6 - reserved));
    const filled = this.total === 0 ? width : Math.round((this.#done / this.total) * width);
    return `${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${figures}`;
  }
}
