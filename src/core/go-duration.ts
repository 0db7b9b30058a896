/**
 * Go's duration strings (`time.ParseDuration`), as a Link's probe spec writes its period
 * and timeout (SPEC §15): `3s`, `1m30s`, `500ms`, `1.5h`. Pure.
 */

const UNITS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  // Go's two spellings of micro (U+00B5 MICRO SIGN, U+03BC GREEK SMALL LETTER MU), escaped:
  // the bundle is ASCII, and a bundled regular expression with them in it did not compile.
  "\u00b5s": 1e-3,
  "\u03bcs": 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Milliseconds of `text`, or undefined when it is not a Go duration. A bare `0` is zero,
 * as in Go; any other number needs a unit.
 */
export function parseGoDuration(text: string): number | undefined {
  const input = text.trim();
  if (input === "0") return 0;
  const body = input.startsWith("-") || input.startsWith("+") ? input.slice(1) : input;
  if (body === "") return undefined;
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  while (at < body.length) {
    part.lastIndex = at;
    const m = part.exec(body);
    if (!m?.[1] || !m[2]) return undefined;
    const unit = UNITS[m[2]];
    if (unit === undefined) return undefined;
    total += Number(m[1]) * unit;
    at = part.lastIndex;
  }
  return input.startsWith("-") ? -total : total;
}
