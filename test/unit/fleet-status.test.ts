/**
 * The status book: MirrorSkipped, InvalidProbeConfig and RemoteReadDenied are reported
 * when a problem appears, not again when a restarted actor finds the same problem;
 * counters never go down across incarnations.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { MirrorProblem } from "../../src/core/desired.ts";
import type { ClusterStatus } from "../../src/protocol/messages.ts";
import { FleetStatusBook } from "../../src/supervisor/fleet-status.ts";

function status(
  epoch: number,
  problems: string[],
  opts: { listed?: boolean; lists?: number; probeProblems?: Record<string, string[]>; denied?: string[] } = {},
): ClusterStatus {
  return {
    cluster: "east",
    epoch,
    state: opts.listed === false ? "syncing" : "synced",
    since: 0,
    ...(opts.listed === false ? {} : { lastSyncedAt: 1 }),
    exportedServices: 1,
    mirrors: 1,
    problems: problems.map(
      (remote): MirrorProblem => ({ cluster: "east", remote, reason: "no-ports", message: "no ports" }),
    ),
    gateways: Object.entries(opts.probeProblems ?? {}).map(([key, probeProblems]) => ({
      key,
      usable: true,
      ...(probeProblems.length > 0 ? { probeProblems } : {}),
    })),
    watch: { lists: opts.lists ?? 1, watchesStarted: 1, failures: 0, relistsOnGone: 0 },
    failuresByReason: {},
    ...(opts.denied ? { deniedReads: opts.denied.map((resource) => ({ resource, message: "forbidden" })) } : {}),
  };
}

const remotes = (ps: readonly MirrorProblem[]): string[] => ps.map((p) => p.remote);

describe("fleet status book", () => {
  it("reports a problem when it appears, not on every status that still has it", () => {
    const book = new FleetStatusBook();
    book.incarnationStarted("east", 1);
    assert.deepEqual(remotes(book.update(status(1, ["ns/a"])).mirrors), ["ns/a"]);
    assert.deepEqual(remotes(book.update(status(1, ["ns/a"])).mirrors), []);
    assert.deepEqual(remotes(book.update(status(1, ["ns/a", "ns/b"])).mirrors), ["ns/b"]);
  });

  it("a restarted actor that finds the same problems reports nothing new, even after statuses sent before it listed", () => {
    const book = new FleetStatusBook();
    book.incarnationStarted("east", 1);
    book.update(status(1, ["ns/a"]));
    book.incarnationStarted("east", 2);
    assert.deepEqual(remotes(book.update(status(2, [], { listed: false })).mirrors), []);
    assert.deepEqual(remotes(book.update(status(2, ["ns/a"])).mirrors), []);
    assert.deepEqual(remotes(book.update(status(1, ["ns/z"])).mirrors), [], "an older incarnation's status is ignored");
  });

  it("a problem that went away and comes back is reported again", () => {
    const book = new FleetStatusBook();
    book.incarnationStarted("east", 1);
    book.update(status(1, ["ns/a"]));
    book.update(status(1, []));
    assert.deepEqual(remotes(book.update(status(1, ["ns/a"])).mirrors), ["ns/a"]);
  });

  it("reports a denied remote read once per cluster: not per status, not after a restart that has not tried it yet", () => {
    const book = new FleetStatusBook();
    const fresh = (s: ClusterStatus) => book.update(s).deniedReads.map((d) => d.resource);
    const slices = "discovery.k8s.io/endpointslices";
    book.incarnationStarted("east", 1);
    assert.deepEqual(fresh(status(1, [], { denied: [slices] })), [slices]);
    assert.deepEqual(fresh(status(1, [], { denied: [slices] })), [], "not on every status");
    book.incarnationStarted("east", 2);
    assert.deepEqual(fresh(status(2, [])), [], "a new incarnation that has not tried the read yet");
    assert.deepEqual(fresh(status(2, [], { denied: [slices] })), [], "then finds it denied too: already reported");
    assert.deepEqual(fresh(status(2, [])), [], "allowed again, said by the incarnation that found it denied");
    assert.deepEqual(fresh(status(2, [], { denied: [slices] })), [slices], "denied again: reported again");
  });

  it("reports a gateway's bad probe config when it appears, once per problem, and not again after a restart", () => {
    const book = new FleetStatusBook();
    const probes = (problems: string[]) => ({ probeProblems: { "gw/gateway": problems } });
    const fresh = (s: ClusterStatus) => book.update(s).probeConfig.map((p) => `${p.gateway}: ${p.problem}`);
    book.incarnationStarted("east", 1);
    assert.deepEqual(fresh(status(1, [], { listed: false, ...probes(["period"]) })), [], "not before the first list");
    assert.deepEqual(fresh(status(1, [], probes(["period"]))), ["gw/gateway: period"]);
    assert.deepEqual(fresh(status(1, [], probes(["period"]))), [], "not on every status");
    assert.deepEqual(fresh(status(1, [], probes(["period", "path"]))), ["gw/gateway: path"]);
    book.incarnationStarted("east", 2);
    assert.deepEqual(fresh(status(2, [], probes(["period", "path"]))), [], "a restarted actor finds the same");
    assert.deepEqual(fresh(status(2, [], probes([]))), []);
    assert.deepEqual(fresh(status(2, [], probes(["period"]))), ["gw/gateway: period"], "gone and back: again");
  });
});
