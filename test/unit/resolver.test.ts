/**
 * Gateway hostname resolution (SPEC §2) off libuv's shared thread pool: one cluster's
 * slow or dead DNS server must not delay another cluster's lookups, nor wait behind the
 * pool's other work. Tiny UDP DNS servers on 127.0.0.1 play the network.
 */
import assert from "node:assert/strict";
import { pbkdf2 } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createResolver } from "../../workers/remote-cluster/resolver.ts";
import { DnsStub, TYPE_A, TYPE_AAAA } from "../helpers/dns-stub.ts";

const codeOf = (error: unknown): unknown => (error as { code?: unknown }).code;

describe("gateway hostname resolver", () => {
  let good: DnsStub;
  let dead: DnsStub;
  let hostsPath: string;

  before(async () => {
    good = await DnsStub.start();
    good.set("gw.east.example", ["198.18.0.12", "198.18.0.7"]);
    dead = await DnsStub.start("drop");
    hostsPath = join(mkdtempSync(join(tmpdir(), "resolver-")), "hosts");
    writeFileSync(
      hostsPath,
      "# comment\n127.0.0.1 localhost loopback.example\n::1 localhost ip6-localhost\n198.18.0.5 gw.hosts.example # trailing\n",
    );
  });
  after(() => {
    good?.close();
    dead?.close();
  });

  it("resolves a name through its DNS server to every address, sorted", async () => {
    const resolve = createResolver({ servers: [good.server], hostsPath });
    assert.deepEqual(await resolve("gw.east.example"), ["198.18.0.12", "198.18.0.7"].sort());
  });

  it("answers names of the hosts file from the file, as the system resolver does", async () => {
    const resolve = createResolver({ servers: [dead.server], hostsPath, timeoutMs: 200, tries: 1 });
    assert.deepEqual(await resolve("localhost"), ["127.0.0.1", "::1"]);
    assert.deepEqual(await resolve("GW.hosts.example"), ["198.18.0.5"]);
    assert.equal(dead.total, 0, "no DNS query for a name the hosts file has");
  });

  it("answers a name of the reserved invalid. domain ENOTFOUND without asking any DNS server", async () => {
    const before = dead.total;
    const resolve = createResolver({ servers: [dead.server], hostsPath, timeoutMs: 200, tries: 1 });
    for (const name of ["does-not-exist.invalid", "gateway.does-not-exist.INVALID.", "invalid"]) {
      await assert.rejects(resolve(name), (error: unknown) => (error as { code?: string }).code === "ENOTFOUND");
    }
    assert.equal(dead.total, before, "no DNS query for a name in invalid.");
  });

  it("rejects a name its DNS server does not know, and a server that never answers after timeout × tries", async () => {
    const resolve = createResolver({ servers: [good.server], hostsPath });
    await assert.rejects(resolve("missing.east.example"), /missing\.east\.example/);
    const silent = createResolver({ servers: [dead.server], hostsPath, timeoutMs: 100, tries: 2 });
    const started = Date.now();
    await assert.rejects(silent("gw.west.example"), /gw\.west\.example/);
    assert.ok(Date.now() - started < 3_000, "gave up after its timeout and tries");
  });

  it("answers the A addresses of a name whose AAAA query is never answered", async () => {
    good.set("dual.east.example", ["1.2.3.4"]);
    good.set("dual.east.example", "drop", TYPE_AAAA);
    const resolve = createResolver({ servers: [good.server], hostsPath, timeoutMs: 200, tries: 1 });
    assert.deepEqual(await resolve("dual.east.example"), ["1.2.3.4"]);
  });

  it("answers the AAAA addresses of a name whose A query fails with SERVFAIL", async () => {
    good.set("v6.east.example", ["2001:db8::7"]);
    good.set("v6.east.example", "servfail", TYPE_A);
    const resolve = createResolver({ servers: [good.server], hostsPath, timeoutMs: 200, tries: 1 });
    assert.deepEqual(await resolve("v6.east.example"), ["2001:db8::7"]);
  });

  it("rejects with the transient error, not ENOTFOUND, when no family answered and one failed", async () => {
    const resolve = createResolver({ servers: [good.server], hostsPath, timeoutMs: 200, tries: 1 });
    good.set("flaky.east.example", "drop");
    await assert.rejects(resolve("flaky.east.example"), (error: unknown) => codeOf(error) === "ETIMEOUT");
    good.set("broken.east.example", []);
    good.set("broken.east.example", "servfail", TYPE_A);
    await assert.rejects(resolve("broken.east.example"), (error: unknown) => codeOf(error) === "ESERVFAIL");
    good.set("gone.east.example", "nxdomain");
    await assert.rejects(resolve("gone.east.example"), (error: unknown) => codeOf(error) === "ENOTFOUND");
  });

  it("asks only the family it is given: [] when that family has no address or the name does not exist", async () => {
    good.set("one.east.example", ["198.18.0.40", "2001:db8::40"]);
    const resolve = createResolver({ servers: [good.server], hostsPath, timeoutMs: 200, tries: 1 });
    const before = good.count("one.east.example", TYPE_AAAA);
    assert.deepEqual(await resolve("one.east.example", 4), ["198.18.0.40"]);
    assert.equal(good.count("one.east.example", TYPE_AAAA), before, "no AAAA query for family 4");
    assert.deepEqual(await resolve("one.east.example", 6), ["2001:db8::40"]);
    good.set("four.east.example", ["198.18.0.41"]);
    assert.deepEqual(await resolve("four.east.example", 6), []);
    assert.deepEqual(await resolve("localhost", 4), ["127.0.0.1"], "the hosts file, by family");
    assert.deepEqual(await resolve("gone.east.example", 4), [], "no such name: none of that family");
  });

  it("does not delay one cluster's lookup behind another cluster's dead DNS server or a busy thread pool", async () => {
    const slow = createResolver({ servers: [dead.server], hostsPath, timeoutMs: 3_000, tries: 1 });
    const fast = createResolver({ servers: [good.server], hostsPath });
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
