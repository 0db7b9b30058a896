/**
 * Real traffic through the mirrors (sandbox/traffic.ts): a client Pod of the local
 * cluster, in a network namespace of its own, resolves names through CoreDNS and
 * connects through kube-proxy's nftables rules to the gateway a mirror points at, whose
 * server answers with its cluster's name. Every request's outcome is counted.
 *
 * Needs root: without it (and outside CI) the suite is skipped with one line saying why;
 * under CI it fails (test/helpers/traffic-world.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { describeTally, judgeFailover, type Round, sendRounds, tally } from "../../sandbox/traffic-rounds.ts";
import { eventually } from "../helpers/kube.ts";
import { countedAnswers, startTrafficWorld, type TrafficWorld, trafficSkipReason } from "../helpers/traffic-world.ts";

/** Requests in each counted batch. */
const N = 40;
/**
 * A failover slower than this fails the test: a generous bound that catches a failover
 * that does not happen (the figure itself is the bench's traffic_failover_s, target 10 s).
 */
const FAILOVER_BOUND_S = 30;
const skip = await trafficSkipReason();

describe("real traffic through the mirrors", { skip: skip ?? false }, () => {
  let world: TrafficWorld;

  before(async () => {
    world = await startTrafficWorld();
  });
  after(async () => {
    await world?.stop();
  });

  /** Waits until a round of 10 requests is answered by exactly `clusters` (each at least once), then counts N. */
  const counted = (host: string, port: number, clusters: readonly string[]) =>
    countedAnswers(world, host, port, clusters, N);

  it("the client Pod has no route beyond the Service CIDR and the gateways' local prefix: a request elsewhere fails in the Pod, unsent", async () => {
    // 203.0.113.0/24 (TEST-NET-3) is in neither; the Pod has no default route, so the
    // connect fails at once in the Pod's own routing table.
    const t = tally(await world.send("203.0.113.7", 80, 3, 1_000));
    assert.deepEqual({ answers: t.answers, errors: t.errors }, { answers: {}, errors: { ENETUNREACH: 3 } });
  });

  it("a Pod's requests to web-east.shop.svc.cluster.local are all answered by east's gateway", async () => {
    const t = await counted("web-east.shop.svc.cluster.local", 80, ["east"]);
    assert.deepEqual({ answers: t.answers, errors: t.errors }, { answers: { east: N }, errors: {} });
  });

  it("the headless host db-0.db-east.shop.svc.cluster.local reaches east's gateway", async () => {
    const t = await counted("db-0.db-east.shop.svc.cluster.local", 5432, ["east"]);
    assert.deepEqual({ answers: t.answers, errors: t.errors }, { answers: { east: N }, errors: {} });
  });

  it("search-federated is answered by east and west; when west's gateway dies every request is soon answered by east with none refused after, and when it comes back by both again", async () => {
    const both = await counted("search-federated", 80, ["east", "west"]);
    assert.deepEqual(both.errors, {});
    assert.ok((both.answers["east"] ?? 0) > 0 && (both.answers["west"] ?? 0) > 0, describeTally(both));
    assert.equal((both.answers["east"] ?? 0) + (both.answers["west"] ?? 0), N);

    // Rounds of 5 requests every 200 ms, until 5 s of rounds answered by east alone.
    const diedAt = Date.now();
    await world.gateways.stopAnswering("west");
    const rounds = await sendRounds(() => world.send("search-federated", 80, 5), {
      roundMs: 200,
      maxMs: 90_000,
      done: (r: readonly Round[]) => judgeFailover(r, diedAt, ["east"]).stableS >= 5,
    });
    const run = judgeFailover(rounds, diedAt, ["east"]);
    const all = tally(rounds.flatMap((r) => r.outcomes));
    process.stdout.write(
      `# failover: every request answered by east ${run.failoverS} s after west's gateway died; ${run.sent} requests (${describeTally(all)}), ${run.failedBefore} failed before\n`,
    );
    assert.ok(run.failoverS !== undefined && run.failoverS <= FAILOVER_BOUND_S, `failover after ${run.failoverS} s`);
    assert.ok(run.stableS >= 5, `answered by east alone for ${run.stableS} s only`);
    // Before the failover a request to west's dead gateway was refused there, on this
    // machine; none timed out (nothing went astray).
    assert.deepEqual(
      Object.keys(all.errors).filter((code) => code !== "ECONNREFUSED"),
      [],
    );

    await world.gateways.answerAgain("west");
    const back = await counted("search-federated", 80, ["east", "west"]);
    assert.deepEqual(back.errors, {});
    assert.equal((back.answers["east"] ?? 0) + (back.answers["west"] ?? 0), N);
  });

  it("the MCS name orders.shop.svc.clusterset.local reaches east and west, and east alone once west withdraws its ServiceExport", async () => {
    const both = await counted("orders.shop.svc.clusterset.local", 8080, ["east", "west"]);
    assert.deepEqual(both.errors, {});
    await world.westExport.withdraw();
    const east = await counted("orders.shop.svc.clusterset.local", 8080, ["east"]);
    assert.deepEqual({ answers: east.answers, errors: east.errors }, { answers: { east: N }, errors: {} });
  });

  it("an unexported Service stops answering: its name no longer resolves and its old cluster IP is not answered", async () => {
    await counted("web-east.shop.svc.cluster.local", 80, ["east"]);
    const clusterIp = (await world.fleet.localService("shop", "web-east"))?.spec?.clusterIP;
    assert.ok(clusterIp, "web-east's mirror has a cluster IP");
    await world.fleet.unexport("east", "shop", "web");
    await eventually("web-east's name gone from the Pod's DNS", async () => {
      const [outcome] = await world.traffic.lookup("web-east.shop.svc.cluster.local");
      return outcome && "error" in outcome && outcome.error === "ENOTFOUND" ? true : undefined;
    });
    const byName = tally(await world.send("web-east.shop.svc.cluster.local", 80, N));
    assert.deepEqual({ answers: byName.answers, errors: byName.errors }, { answers: {}, errors: { ENOTFOUND: N } });
    // kube-proxy drops its rules a sync after CoreDNS forgets the name (its minimum sync
    // period is 1 s): seen answering for about half a second after the name was gone.
    await eventually(`the old cluster IP ${clusterIp} no longer answered`, async () =>
      Object.keys(tally(await world.send(clusterIp, 80, 10, 1_000)).answers).length === 0 ? true : undefined,
    );
    const byIp = tally(await world.send(clusterIp, 80, N, 1_000));
    assert.deepEqual(byIp.answers, {}, `the old cluster IP ${clusterIp} answered: ${describeTally(byIp)}`);
    assert.equal(byIp.total, N);
  });
});
