import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import { MirrorActivity, type MirrorRow, renderTable, type TableInput } from "../../sandbox/demo-table.ts";
import { Screen } from "../../sandbox/screen.ts";
import type { ClusterRow, FleetStatus } from "../../src/status/fleet-view.ts";

class FakeOut extends EventEmitter {
  written = "";
  destroyed = false;
  readonly isTTY: boolean;
  readonly columns: number;
  readonly rows = 40;
  constructor(isTTY: boolean, columns = 100) {
    super();
    this.isTTY = isTTY;
    this.columns = columns;
  }
  write(text: string): boolean {
    this.written += text;
    return true;
  }
}

function screenOn(out: FakeOut, interactive = true): Screen {
  return new Screen(out as unknown as NodeJS.WriteStream, { interactive });
}

const row = (
  cluster: string,
  mirrors: number,
  lastSyncedAt?: number,
  gateways: ClusterRow["gateways"] = [{ key: "gateway/gateway", usable: true }],
): ClusterRow => ({
  cluster,
  secret: `fleet-mirror/cluster-credentials-${cluster}`,
  state: "synced",
  mirrors,
  exportedServices: mirrors,
  ...(lastSyncedAt !== undefined ? { lastSyncedAt } : {}),
  restarts: 0,
  gateways,
  problems: [],
});

const mirror = (key: string, cluster: string, endpoints = "198.51.100.65:4143"): MirrorRow => ({
  key,
  cluster,
  ports: "80/TCP",
  addresses: endpoints.split(",").map((address) => ({ address, ready: true })),
  endpoints,
});

function input(over: Partial<TableInput> & { clusters: ClusterRow[]; mirrors: MirrorRow[] }): TableInput {
  const status = { clusters: over.clusters } as unknown as FleetStatus;
  return {
    status,
    mirrors: over.mirrors,
    activity: over.activity ?? new MirrorActivity(),
    lastStep: over.lastStep ?? "(none yet)",
    kubeconfigPath: "/tmp/local.kubeconfig",
    now: over.now ?? 10_000,
  };
}

function clusterLine(text: string, cluster: string): string[] {
  const line = text.split("\n").find((l) => l.startsWith(`${cluster} `));
  assert.ok(line, `a row for ${cluster} in:\n${text}`);
  return line.split(/\s+/);
}

describe("the demo's table", () => {
  it("counts MIRRORS from the mirrors it lists, not from the controller's last status", () => {
    // The writer's status (published once a second) still says 0 and 1: the table must not lag.
    const mirrors = [
      mirror("shop/web-east", "east"),
      mirror("shop/cart-east", "east"),
      mirror("shop/web-west", "west"),
    ];
    const { text } = renderTable(input({ clusters: [row("east", 0), row("west", 1)], mirrors }));
    assert.equal(clusterLine(text, "east")[2], "2");
    assert.equal(clusterLine(text, "west")[2], "1");
  });

  it("shows when the watch started and how long ago a cluster's mirrors last changed, not an age since the last list", () => {
    const activity = new MirrorActivity();
    const listedAt = new Date(2026, 0, 1, 12, 34, 56).getTime();
    activity.observe([mirror("shop/web-east", "east")], 1_000);
    activity.observe([mirror("shop/web-east", "east")], 5_000);
    const text1 = renderTable(input({ clusters: [row("east", 1, listedAt)], mirrors: [], activity, now: 8_000 })).text;
    assert.match(text1, /WATCHING SINCE\s+LAST CHANGE/);
    assert.doesNotMatch(text1, /LAST SYNC/);
    assert.deepEqual(clusterLine(text1, "east").slice(3, 6), ["12:34:56", "7s", "ago"]);
    activity.observe([mirror("shop/web-east", "east", "198.51.100.67:4143")], 9_000);
    const text2 = renderTable(input({ clusters: [row("east", 1, listedAt)], mirrors: [], activity, now: 10_000 })).text;
    assert.deepEqual(clusterLine(text2, "east").slice(3, 6), ["12:34:56", "1s", "ago"]);
  });

  it("shows whether a probed gateway's addresses are alive or dead, and nothing more for one not probed", () => {
    const probe = (alive: number, dead: number) => ({
      port: 4191,
      path: "/ready",
      periodSeconds: 1,
      alive,
      dead,
      deadAddresses: dead > 0 ? ["198.51.100.66"] : [],
    });
    const clusters = [
      row("east", 1, undefined, [{ key: "gateway/gateway", usable: true, probe: probe(1, 0) }]),
      row("west", 1, undefined, [{ key: "gateway/gateway", usable: true, probe: probe(0, 1) }]),
      row("north", 1),
    ];
    const { text, content } = renderTable(input({ clusters, mirrors: [] }));
    assert.match(clusterLine(text, "east").slice(6).join(" "), /^gateway\/gateway:usable alive$/);
    assert.match(clusterLine(text, "west").slice(6).join(" "), /^gateway\/gateway:usable 1\/1 dead$/);
    assert.match(clusterLine(text, "north").slice(6).join(" "), /^gateway\/gateway:usable$/);
    assert.match(content, /1\/1 dead/, "a gateway dying is content: a pipe gets a new table");
  });

  it("shows the fleet-wide Service's tiers on a line under its row, and a switch is content", () => {
    const fleet = mirror("shop/search-federated", "fleet");
    const withTiers = (servingPriority: number) => {
      const tiers = [0, 10, 20].map((priority) => ({ priority, ready: 1, serving: priority <= servingPriority }));
      const federated = [
        { key: "shop/search-federated", clusters: [], kept: [], ready: 0, notReady: 0, tiers, servingPriority },
      ];
      const base = input({ clusters: [row("east", 1)], mirrors: [fleet] });
      return renderTable({
        ...base,
        status: {
          ...base.status,
          writer: { ready: true, queueDepth: 0, writes: {}, federated },
        } as unknown as FleetStatus,
      });
    };
    const lines = withTiers(10).text.split("\n");
    const at = lines.findIndex((l) => l.startsWith("shop/search-federated "));
    assert.equal(
      lines[at + 1],
      "  tiers: 0 local serving (1 ready), 10 west serving (1 ready), 20 east standby (1 ready)",
    );
    assert.notEqual(withTiers(20).content, withTiers(10).content);
  });

  it("keeps ages out of its content, so the same table a second later is no change", () => {
    const activity = new MirrorActivity();
    const mirrors = [mirror("shop/web-east", "east")];
    activity.observe(mirrors, 0);
    const a = renderTable(input({ clusters: [row("east", 1)], mirrors, activity, now: 1_000 }));
    const b = renderTable(input({ clusters: [row("east", 1)], mirrors, activity, now: 2_000 }));
    assert.notEqual(a.text, b.text);
    assert.equal(a.content, b.content);
    const c = renderTable(input({ clusters: [row("east", 1)], mirrors: [], activity, now: 2_000 }));
    assert.notEqual(c.content, b.content);
  });
});

describe("the demo's screen", () => {
  it("prints a table to a pipe only when its content changed", () => {
    const out = new FakeOut(false);
    const screen = screenOn(out);
    screen.show({ text: "T1 0s ago", content: "T1" });
    screen.show({ text: "T1 1s ago", content: "T1" });
    screen.show({ text: "T1 2s ago", content: "T1" });
    screen.show({ text: "T2 0s ago", content: "T2" });
    assert.equal(out.written, "\nT1 0s ago\n\nT2 0s ago\n");
  });

  it("redraws the table in place on a terminal, with log lines above it", () => {
    const out = new FakeOut(true);
    const screen = screenOn(out);
    screen.write("starting\n");
    screen.show({ text: "a\nb", content: "ab" });
    screen.show({ text: "a\nc", content: "ac" });
    screen.write("[demo] step\n");
    // cursor up 2 lines to column 1, clear to the end of the screen, draw again
    assert.equal(
      out.written,
      "starting\n" + "a\nb\n" + "\x1b[2F\x1b[J" + "a\nc\n" + "\x1b[2F\x1b[J[demo] step\n" + "a\nc\n",
    );
  });

  it("writes below the last table once released (the stop line)", () => {
    const out = new FakeOut(true);
    const screen = screenOn(out);
    screen.show({ text: "a\nb", content: "ab" });
    screen.release();
    screen.write("Stopped\n");
    assert.equal(out.written, "a\nb\n\r\x1b[KStopped\n");
  });

  it("cuts lines to the terminal's width, so no line wraps and the redraw stays in place", () => {
    const out = new FakeOut(true, 20);
    const screen = screenOn(out);
    screen.show({ text: "x".repeat(50), content: "x" });
    assert.equal(out.written, `${"x".repeat(19)}…\n`);
  });

  it("stops writing, without throwing, once the reader of its output is gone", () => {
    const out = new FakeOut(false);
    const screen = screenOn(out);
    out.emit("error", Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
    screen.write("after\n");
    screen.show({ text: "T", content: "T" });
    assert.equal(out.written, "");
  });

  it("appends like a pipe when not interactive (--script-once), even on a terminal", () => {
    const out = new FakeOut(true);
    const screen = screenOn(out, false);
    screen.show({ text: "T1", content: "T1" });
    screen.show({ text: "T2", content: "T2" });
    assert.equal(out.written, "\nT1\n\nT2\n");
  });
});
