/**
 * IP addresses and CIDR ranges as gateway addresses need them (pure, no I/O): parsing
 * (no DNS names, no zone indexes), the Endpoints validation of the API server, and
 * whether a range holds an address. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
 * counts as the IPv4 address it maps, everywhere here.
 */

/** The order gateway addresses are written in (SPEC §2: sorted). */
export const compareIps = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function parseIpv4(text: string): number[] | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const octets = parts.map((p) => (/^\d{1,3}$/.test(p) ? Number(p) : Number.NaN));
  return octets.every((o) => o >= 0 && o <= 255) ? octets : undefined;
}

/** The eight 16-bit groups of an IPv6 address (an embedded IPv4 tail included), or undefined. */
export function parseIpv6(text: string): number[] | undefined {
  if (!text.includes(":") || text.includes("%")) return undefined;
  let tail: number[] = [];
  let head = text;
  const lastColon = text.lastIndexOf(":");
  if (text.slice(lastColon + 1).includes(".")) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (!v4) return undefined;
    tail = [((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0)];
    head = `${text.slice(0, lastColon + 1)}0`;
  }
  const halves = head.split("::");
  if (halves.length > 2) return undefined;
  const group = (g: string): number => (/^[0-9a-fA-F]{1,4}$/.test(g) ? Number.parseInt(g, 16) : Number.NaN);
  const left = halves[0] ? halves[0].split(":").map(group) : [];
  const right = halves.length === 2 && halves[1] ? halves[1].split(":").map(group) : [];
  // Drop the placeholder group that stood for the IPv4 tail.
  if (tail.length > 0) (halves.length === 2 ? right : left).pop();
  const explicit = left.length + right.length + tail.length;
  if (halves.length === 1 ? explicit !== 8 : explicit > 7) return undefined;
  const groups = [...left, ...new Array<number>(8 - explicit).fill(0), ...right, ...tail];
  return groups.every((g) => Number.isInteger(g)) ? groups : undefined;
}

/**
 * Why the API server refuses `ip` as an Endpoints address (Kubernetes' validation of
 * endpoint IPs: a valid IP that is not unspecified, loopback, link-local or link-local
 * multicast), or undefined when it accepts it. A gateway hostname resolving to
 * 127.0.0.1 would otherwise make every Endpoints write fail forever.
 */
export function endpointIpProblem(ip: string): string | undefined {
  let v4 = parseIpv4(ip);
  if (!v4) {
    const v6 = parseIpv6(ip);
    if (!v6) return "not an IP address";
    const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = v6;
    if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff) {
      v4 = [g6 >> 8, g6 & 0xff, g7 >> 8, g7 & 0xff]; // IPv4-mapped: the IPv4 rules apply
    } else {
      if (v6.every((g) => g === 0)) return "unspecified";
      if (v6.slice(0, 7).every((g) => g === 0) && g7 === 1) return "loopback";
      if ((g0 & 0xffc0) === 0xfe80) return "link-local";
      if ((g0 & 0xff0f) === 0xff02) return "link-local multicast";
      return undefined;
    }
  }
  const [a = 0, b = 0, c = 0, d = 0] = v4;
  if (a === 0 && b === 0 && c === 0 && d === 0) return "unspecified";
  if (a === 127) return "loopback";
  if (a === 169 && b === 254) return "link-local";
  if (a === 224 && b === 0 && c === 0) return "link-local multicast";
  return undefined;
}

/** An address as a number: 32 bits for IPv4 (an IPv4-mapped IPv6 address included), 128 for IPv6. */
export interface NumericIp {
  readonly family: 4 | 6;
  readonly value: bigint;
}

/** A parsed CIDR range; `text` is its canonical form (`network/prefix`). */
export interface Cidr extends NumericIp {
  readonly prefix: number;
  readonly text: string;
}

function toBigInt(parts: readonly number[], bits: number): bigint {
  return parts.reduce((n, part) => (n << BigInt(bits)) | BigInt(part), 0n);
}

/** `ip` as a number, or undefined when it is not an IP address. */
export function numericIp(ip: string): NumericIp | undefined {
  const v4 = parseIpv4(ip);
  if (v4) return { family: 4, value: toBigInt(v4, 8) };
  const v6 = parseIpv6(ip);
  if (!v6) return undefined;
  if (v6.slice(0, 5).every((g) => g === 0) && v6[5] === 0xffff) return { family: 4, value: toBigInt(v6.slice(6), 16) };
  return { family: 6, value: toBigInt(v6, 16) };
}

const width = (family: 4 | 6): number => (family === 4 ? 32 : 128);

function formatIp(family: 4 | 6, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join(".");
  const groups = Array.from({ length: 8 }, (_, i) => ((value >> BigInt(112 - i * 16)) & 0xffffn).toString(16));
  return groups.join(":").replace(/(^|:)0(:0)+(:|$)/, "::");
}

/**
 * Parses `a.b.c.d/n` or `v6/n`; the host bits are cleared (`10.96.0.1/16` is
 * 10.96.0.0/16). Returns the problem as text when `text` is not a CIDR range.
 */
export function parseCidr(text: string): Cidr | string {
  const [address = "", prefixText, ...rest] = text.trim().split("/");
  if (prefixText === undefined || rest.length > 0 || !/^\d{1,3}$/.test(prefixText))
    return `${JSON.stringify(text)} is not a CIDR range (address/prefix)`;
  const ip = numericIp(address);
  if (!ip) return `${JSON.stringify(text)}: ${JSON.stringify(address)} is not an IP address`;
  const bits = width(ip.family);
  // A mapped IPv4 address with a /96+n prefix means the IPv4 /n.
  const prefix = Number(prefixText) - (ip.family === 4 && address.includes(":") ? 96 : 0);
  if (prefix < 0 || prefix > bits) return `${JSON.stringify(text)}: the prefix must be 0 to ${bits}`;
  const host = (1n << BigInt(bits - prefix)) - 1n;
  const value = ip.value & ~host;
  return { family: ip.family, value, prefix, text: `${formatIp(ip.family, value)}/${prefix}` };
}

/** Whether `range` holds `ip`. */
export function cidrContains(range: Cidr, ip: NumericIp): boolean {
  if (range.family !== ip.family) return false;
  const shift = BigInt(width(range.family) - range.prefix);
  return ip.value >> shift === range.value >> shift;
}
