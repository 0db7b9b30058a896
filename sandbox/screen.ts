/**
 * The demo's output: log lines, and one live table below them.
 *
 * - On a terminal the table is redrawn in place (cursor up over the previous drawing,
 *   clear to the end of the screen), so the screen shows one table, and the scrollback
 *   keeps the log lines only. Lines are cut to the terminal's width and the table to its
 *   height: a wrapped or scrolled line would put the cursor arithmetic off.
 * - Elsewhere (a pipe, a file) a table is printed only when its content changed; ages
 *   ("3s ago") are not content, so an idle demo prints nothing.
 * - A reader that goes away (`npm start | tee log`, and tee dies from the same Ctrl-C)
 *   is not an error: output stops, the demo goes on stopping its sandbox.
 */

/** A table to show: `text` as drawn now; `content` what it says without the clock. */
export interface Frame {
  readonly text: string;
  readonly content: string;
}

const CURSOR_UP_LINES = (n: number) => `\x1b[${n}F`;
const CLEAR_TO_END = "\x1b[J";

export class Screen {
  readonly #out: NodeJS.WriteStream;
  readonly #tty: boolean;
  #gone = false;
  /** Terminal lines the table occupies now (TTY only). */
  #drawn = 0;
  #lastText: string | undefined;
  #lastContent: string | undefined;

  constructor(out: NodeJS.WriteStream, options: { readonly interactive?: boolean } = {}) {
    this.#out = out;
    this.#tty = (options.interactive ?? true) && out.isTTY === true;
    // EPIPE and friends: the reader is gone; keep quiet rather than crash half-way
    // through stopping (which would leave the sandbox directory behind).
    out.on("error", () => {
      this.#gone = true;
    });
  }

  /** True once the reader of the output went away. */
  get gone(): boolean {
    return this.#gone;
  }

  get interactive(): boolean {
    return this.#tty;
  }

  /** Writes text as it is (start-up messages); on a terminal, above the table. */
  write(text: string): void {
    if (!this.#tty || this.#drawn === 0) {
      this.#emit(text);
      return;
    }
    this.#emit(`${CURSOR_UP_LINES(this.#drawn)}${CLEAR_TO_END}${text}`);
    this.#drawn = 0;
    if (this.#lastText !== undefined) this.#draw(this.#lastText);
  }

  /** Shows a table: redrawn in place on a terminal, printed again elsewhere only when its content changed. */
  show(frame: Frame, options: { readonly force?: boolean } = {}): void {
    if (this.#tty) {
      if (frame.text === this.#lastText && !options.force) return;
      if (this.#drawn > 0) this.#emit(`${CURSOR_UP_LINES(this.#drawn)}${CLEAR_TO_END}`);
      this.#drawn = 0;
      this.#draw(frame.text);
    } else if (frame.content !== this.#lastContent || options.force) {
      this.#emit(`\n${frame.text}\n`);
    }
    this.#lastText = frame.text;
    this.#lastContent = frame.content;
  }

  /**
   * Writes the last line (below a released table) and resolves once it is out: on the
   * output, or on `fallback` (stderr: the terminal) if the output's reader is gone —
   * which a write only finds out by failing.
   */
  async finalLine(text: string, fallback: NodeJS.WritableStream): Promise<void> {
    const line = `${text}\n`;
    const written =
      !this.#gone &&
      !this.#out.destroyed &&
      (await new Promise<boolean>((resolve) => this.#out.write(line, (error) => resolve(!error))));
    if (!written) await new Promise<void>((resolve) => fallback.write(line, () => resolve()));
  }

  /** Leaves the table as it is on screen: what is written next goes below it (the last lines, on stop). */
  release(): void {
    // Back to column 1 of the line below the table, over the terminal's "^C" echo.
    if (this.#tty && this.#drawn > 0) this.#emit("\r\x1b[K");
    this.#drawn = 0;
    this.#lastText = undefined;
  }

  #draw(text: string): void {
    const width = Math.max(20, this.#out.columns ?? 120);
    const height = Math.max(5, (this.#out.rows ?? 50) - 1);
    const lines = text.split("\n").map((line) => cut(line, width));
    const shown = lines.length > height ? [...lines.slice(0, height - 1), "…"] : lines;
    this.#emit(`${shown.join("\n")}\n`);
    this.#drawn = shown.length;
  }

  #emit(text: string): void {
    if (this.#gone || this.#out.destroyed) return;
    this.#out.write(text);
  }
}

/** Cuts a line to `width` terminal columns (the table is ASCII but for "—" and "→"). */
function cut(line: string, width: number): string {
  const chars = [...line];
  return chars.length <= width ? line : `${chars.slice(0, width - 1).join("")}…`;
}
