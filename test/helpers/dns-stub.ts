/**
 * A tiny UDP DNS server on 127.0.0.1 whose answers a test sets per name and query type:
 * records (A or AAAA), no answer at all (a resolver path that drops the query), SERVFAIL,
 * or NXDOMAIN. Nothing but the test's own resolver ever asks it; no query leaves the host.
 */
import { createSocket, type Socket } from "node:dgram";
import { isIPv4, isIPv6 } from "node:net";

/** How the stub answers one (name, type): the records, or a failure. */
export type StubAnswer = readonly string[] | "drop" | "servfail" | "nxdomain";

export const TYPE_A = 1;
export const TYPE_AAAA = 28;

/** The question's name and type from a DNS query, and where the question ends. */
function question(query: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  for (let length = query[at] ?? 0; length > 0; length = query[at] ?? 0) {
    labels.push(query.subarray(at + 1, at + 1 + length).toString("ascii"));
    at += 1 + length;
  }
  return { name: labels.join(".").toLowerCase(), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** The 16 bytes of an IPv6 address (no embedded IPv4 tail). */
function ipv6Bytes(ip: string): Buffer {
  const [head = "", tail = ""] = ip.split("::");
  const groups = (part: string): string[] => (part ? part.split(":") : []);
  const left = groups(head);
  const right = ip.includes("::") ? groups(tail) : [];
  const all = [...left, ...new Array<string>(8 - left.length - right.length).fill("0"), ...right];
  const bytes = Buffer.alloc(16);
  all.forEach((g, i) => {
    bytes.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  });
  return bytes;
}

function record(type: number, ip: string): Buffer {
  const data = type === TYPE_A ? Buffer.from(ip.split(".").map(Number)) : ipv6Bytes(ip);
  const rr = Buffer.alloc(12);
  rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
  rr.writeUInt16BE(type, 2);
  rr.writeUInt16BE(1, 4); // class IN
  rr.writeUInt32BE(30, 6); // TTL
  rr.writeUInt16BE(data.length, 10);
  return Buffer.concat([rr, data]);
}

export class DnsStub {
  readonly #socket: Socket;
  readonly #answers = new Map<string, StubAnswer>();
  readonly #otherwise: StubAnswer;
  /** Queries received, by `name/type` (type 1: A, 28: AAAA). */
  readonly queries = new Map<string, number>();

  private constructor(socket: Socket, otherwise: StubAnswer) {
    this.#socket = socket;
    this.#otherwise = otherwise;
    socket.on("message", (query, peer) => this.#answer(query, peer.port, peer.address));
  }

  /** `otherwise`: the answer to every name not `set` (default NXDOMAIN; "drop": a server that never answers). */
  static async start(otherwise: StubAnswer = "nxdomain"): Promise<DnsStub> {
    const socket = createSocket("udp4");
    await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
    return new DnsStub(socket, otherwise);
  }

  /** Every query received so far. */
  get total(): number {
    let n = 0;
    for (const count of this.queries.values()) n += count;
    return n;
  }

  /** `127.0.0.1:<port>`, for a resolver's servers. */
  get server(): string {
    return `127.0.0.1:${this.#socket.address().port}`;
  }

  /**
   * How `name` is answered from now on. Addresses go to the query type of their family
   * (the other type: NOERROR without records); a failure applies to both types unless
   * `type` names one.
   */
  set(name: string, answer: StubAnswer, type?: typeof TYPE_A | typeof TYPE_AAAA): void {
    const key = name.toLowerCase();
    if (typeof answer !== "string") {
      this.#answers.set(
        `${key}/${TYPE_A}`,
        answer.filter((ip) => isIPv4(ip)),
      );
      this.#answers.set(
        `${key}/${TYPE_AAAA}`,
        answer.filter((ip) => isIPv6(ip)),
      );
      return;
    }
    for (const t of type ? [type] : [TYPE_A, TYPE_AAAA]) this.#answers.set(`${key}/${t}`, answer);
  }

  /** Queries of `name` received so far (both types, or `type`). */
  count(name: string, type?: number): number {
    const key = name.toLowerCase();
    if (type) return this.queries.get(`${key}/${type}`) ?? 0;
    return (this.queries.get(`${key}/${TYPE_A}`) ?? 0) + (this.queries.get(`${key}/${TYPE_AAAA}`) ?? 0);
  }

  close(): void {
    this.#socket.close();
  }

  #answer(query: Buffer, port: number, address: string): void {
    const q = question(query);
    const key = `${q.name}/${q.type}`;
    this.queries.set(key, (this.queries.get(key) ?? 0) + 1);
    const answer = this.#answers.get(key) ?? this.#otherwise;
    if (answer === "drop") return;
    const records = typeof answer === "string" ? [] : answer.map((ip) => record(q.type, ip));
    const rcode = answer === "servfail" ? 2 : answer === "nxdomain" ? 3 : 0;
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    header.writeUInt16BE(0x8180 | rcode, 2); // a response, recursion desired and available
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(records.length, 6);
    this.#socket.send(Buffer.concat([header, query.subarray(12, q.end), ...records]), port, address);
  }
}
