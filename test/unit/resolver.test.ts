/**
 * Gateway hostname resolution (SPEC §2) off libuv's shared thread pool: one cluster's
 * slow or dead DNS server must not delay another cluster's lookups, nor wait behind the
 * pool's other work. Tiny UDP DNS servers on 127.0.0.1 play the network.
 */
import assert from "node:assert/strict";
import { pbkdf2 } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createResolver } from "../../workers/remote-cluster/resolver.ts";

/** The question's name and type from a DNS query, and where the question ends. */
function question(query: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  for (let length = query[at] ?? 0; length > 0; length = query[at] ?? 0) {
    labels.push(query.subarray(at + 1, at + 1 + length).toString("ascii"));
    at += 1 + length;
  }
  return { name: labels.join("."), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** A DNS server that answers A queries from `records` (NOERROR, no answer for anything else). */
async function dnsServer(
  records: Readonly<Record<string, readonly string[]>>,
): Promise<{ address: string; socket: Socket }> {
  const socket = createSocket("udp4");
  socket.on("message", (query, peer) => {
    const q = question(query);
    const ips = q.type === 1 ? (records[q.name] ?? []) : [];
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    header.writeUInt16BE(0x8180, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(ips.length, 6);
    const answers = ips.map((ip) => {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0);
      rr.writeUInt16BE(1, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(30, 6);
      rr.writeUInt16BE(4, 10);
      ip.split(".").forEach((octet, i) => {
        rr[12 + i] = Number(octet);
      });
      return rr;
    });
    socket.send(Buffer.concat([header, query.subarray(12, q.end), ...answers]), peer.port, peer.address);
  });
  return listen(socket);
}

/** A DNS server that reads every query and never answers. */
async function blackHole(): Promise<{ address: string; socket: Socket; queries: () => number }> {
  const socket = createSocket("udp4");
  let queries = 0;
  socket.on("message", () => queries++);
  return { ...(await listen(socket)), queries: () => queries };
}

async function listen(socket: Socket): Promise<{ address: string; socket: Socket }> {
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return { address: `127.0.0.1:${socket.address().port}`, socket };
}

describe("gateway hostname resolver", () => {
  let good: { address: string; socket: Socket };
  let dead: { address: string; socket: Socket; queries: () => number };
  let hostsPath: string;

  before(async () => {
    good = await dnsServer({ "gw.east.example": ["198.18.0.12", "198.18.0.7"] });
    dead = await blackHole();
    hostsPath = join(mkdtempSync(join(tmpdir(), "resolver-")), "hosts");
    writeFileSync(
      hostsPath,
      "# comment\n127.0.0.1 localhost loopback.example\n::1 localhost ip6-localhost\n198.18.0.5 gw.hosts.example # trailing\n",
    );
  });
  after(() => {
    good?.socket.close();
    dead?.socket.close();
  });

  it("resolves a name through its DNS server to every address, sorted", async () => {
    const resolve = createResolver({ servers: [good.address], hostsPath });
    assert.deepEqual(await resolve("gw.east.example"), ["198.18.0.12", "198.18.0.7"].sort());
  });

  it("answers names of the hosts file from the file, as the system resolver does", async () => {
    const resolve = createResolver({ servers: [dead.address], hostsPath, timeoutMs: 200, tries: 1 });
    assert.deepEqual(await resolve("localhost"), ["127.0.0.1", "::1"]);
    assert.deepEqual(await resolve("GW.hosts.example"), ["198.18.0.5"]);
    assert.equal(dead.queries(), 0, "no DNS query for a name the hosts file has");
  });

  it("answers a name of the reserved invalid. domain ENOTFOUND without asking any DNS server", async () => {
    const before = dead.queries();
    const resolve = createResolver({ servers: [dead.address], hostsPath, timeoutMs: 200, tries: 1 });
    for (const name of ["does-not-exist.invalid", "gateway.does-not-exist.INVALID.", "invalid"]) {
      await assert.rejects(resolve(name), (error: unknown) => (error as { code?: string }).code === "ENOTFOUND");
    }
    assert.equal(dead.queries(), before, "no DNS query for a name in invalid.");
  });

  it("rejects a name its DNS server does not know, and a server that never answers after timeout × tries", async () => {
    const resolve = createResolver({ servers: [good.address], hostsPath });
    await assert.rejects(resolve("missing.east.example"), /missing\.east\.example/);
    const silent = createResolver({ servers: [dead.address], hostsPath, timeoutMs: 100, tries: 2 });
    const started = Date.now();
    await assert.rejects(silent("gw.west.example"), /gw\.west\.example/);
    assert.ok(Date.now() - started < 3_000, "gave up after its timeout and tries");
  });

  it("does not delay one cluster's lookup behind another cluster's dead DNS server or a busy thread pool", async () => {
    const slow = createResolver({ servers: [dead.address], hostsPath, timeoutMs: 3_000, tries: 1 });
    const fast = createResolver({ servers: [good.address], hostsPath });
    // More slow lookups than libuv has pool threads, plus CPU work that occupies the pool.
    const stuck = Array.from({ length: 8 }, (_, i) => slow(`gw${i}.west.example`).catch(() => "failed"));
    let poolBusy = true;
    const pool = Promise.all(
      Array.from(
        { length: 8 },
        () => new Promise<void>((resolve) => pbkdf2("secret", "salt", 1_500_000, 32, "sha256", () => resolve())),
      ),
    ).then(() => {
      poolBusy = false;
    });
    const answer = await fast("gw.east.example");
    assert.deepEqual(answer, ["198.18.0.12", "198.18.0.7"]);
    assert.ok(poolBusy, "the lookup finished while the thread pool was still busy");
    assert.deepEqual(await Promise.all(stuck), Array(8).fill("failed"));
    await pool;
  });
});
