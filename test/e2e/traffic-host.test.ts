/**
 * The traffic host (sandbox/traffic-host.ts): while held, the Service CIDR is a blackhole
 * on this machine; a second holder waits; what a killed run left (kube-proxy's tables, a
 * route of the sandbox's protocol, a Pod's network namespace) is swept by the next start.
 * Needs root, like the traffic tests (a visible skip without it, a failure under CI).
 */
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { describe, it } from "node:test";
import { promisify } from "node:util";
import { acquireTrafficHost, GUARD_TABLE, NETNS_PREFIX, ROUTE_PROTO } from "../../sandbox/traffic-host.ts";
import { trafficSkipReason } from "../helpers/traffic-world.ts";

const run = promisify(execFile);
const skip = await trafficSkipReason();
const CIDR = "10.96.0.0/16";
/** A stray route a killed run could have left: inside the Service range, so harmless if it stayed. */
const STRAY = "10.96.200.0/24";

async function out(command: string, ...args: string[]): Promise<string> {
  return (await run(command, args)).stdout;
}

describe("the traffic host", { skip: skip ?? false }, () => {
  it("routes the Service CIDR to a blackhole while held, keeps a second holder out, and removes the route on release", async () => {
    const host = await acquireTrafficHost(CIDR, 15 * 60_000);
    assert.ok(host, "the lock within 15 minutes");
    try {
      assert.match(await out("ip", "-4", "route", "show", "proto", ROUTE_PROTO), /^blackhole 10\.96\.0\.0\/16\s*$/m);
      assert.equal(await acquireTrafficHost(CIDR, 0), undefined, "a second holder does not get it");
    } finally {
      await host.release();
    }
    assert.doesNotMatch(await out("ip", "-4", "route", "show", "proto", ROUTE_PROTO), /10\.96\.0\.0\/16/);
  });

  it("drops, while held, what a Pod's veth forwards and what leaves with a Service address rewritten to a non-local one", async () => {
    const guard = ["list", "table", "inet", GUARD_TABLE];
    const host = await acquireTrafficHost(CIDR, 15 * 60_000);
    assert.ok(host, "the lock within 15 minutes");
    try {
      const rules = await out("nft", ...guard);
      assert.match(rules, /hook postrouting/);
      assert.match(rules, /iifname "fmtr\*" counter packets \d+ bytes \d+ drop/);
      assert.match(rules, /ct original ip daddr 10\.96\.0\.0\/16 oifname != "lo" oifname != "fmtr\*" counter .* drop/);
    } finally {
      await host.release();
    }
    await assert.rejects(run("nft", guard), "the guard table is removed on release");
  });

  it("sweeps the blackhole and the guard table of a run killed with SIGKILL at the next start", async () => {
    const module = new URL("../../sandbox/traffic-host.ts", import.meta.url).pathname;
    const script = `const { acquireTrafficHost } = await import(${JSON.stringify(module)});
      if (await acquireTrafficHost(${JSON.stringify(CIDR)}, 15 * 60_000)) console.log("held");
      setInterval(() => undefined, 60_000);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("held")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`the killed run's process exited ${code} before holding`)));
    });
    child.kill("SIGKILL");
    await exited;
    const next = await acquireTrafficHost(CIDR, 15 * 60_000);
    assert.ok(next, "the lock, once the killed run's flock child has died with it");
    try {
      assert.match(next.swept, new RegExp(`table inet ${GUARD_TABLE}`));
      assert.match(next.swept, /route blackhole 10\.96\.0\.0\/16/);
    } finally {
      await next.release();
    }
  });

  it("sweeps a killed run's kube-proxy tables, routes and network namespace at the next start", async () => {
    const netns = `${NETNS_PREFIX}test-${process.pid}`;
    const first = await acquireTrafficHost(CIDR, 15 * 60_000);
    assert.ok(first);
    try {
      // What a run killed with SIGKILL leaves, made while holding the lock.
      await run("nft", ["add", "table", "ip", "kube-proxy"]);
      await run("ip", ["route", "add", "blackhole", STRAY, "proto", ROUTE_PROTO]);
      await run("ip", ["netns", "add", netns]);
    } finally {
      await first.release();
    }
    const second = await acquireTrafficHost(CIDR, 15 * 60_000);
    assert.ok(second);
    try {
      assert.doesNotMatch(await out("nft", "list", "tables"), /^table ip kube-proxy$/m);
      assert.doesNotMatch(await out("ip", "-4", "route", "show", "proto", ROUTE_PROTO), /10\.96\.200\.0\/24/);
      assert.doesNotMatch(await out("ip", "netns", "list"), new RegExp(`^${netns}\\b`, "m"));
    } finally {
      await second.release();
    }
  });
});
