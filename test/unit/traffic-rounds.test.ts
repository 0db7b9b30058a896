/**
 * The pure parts of the sandbox's traffic path: how rounds of requests are judged
 * (sandbox/traffic-rounds.ts), the clusterset hosts file (sandbox/clusterset-dns.ts) and
 * a Pod's resolv.conf (sandbox/pod-netns.ts).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { clustersetHosts } from "../../sandbox/clusterset-dns.ts";
import { podResolvConf } from "../../sandbox/pod-netns.ts";
import type { Outcome } from "../../sandbox/traffic-client.ts";
import { describeTally, judgeFailover, type Round, settledFrom, tally } from "../../sandbox/traffic-rounds.ts";

const east: Outcome = { answer: "east" };
const west: Outcome = { answer: "west" };
const refused: Outcome = { error: "ECONNREFUSED" };
const round = (atMs: number, ...outcomes: Outcome[]): Round => ({ atMs, outcomes });

describe("traffic rounds", () => {
  it("counts every outcome, answers by cluster and errors by code, and says them in one line", () => {
    const t = tally([east, west, east, refused, { error: "ENOTFOUND" }, { error: "EAI_AGAIN" }]);
    assert.deepEqual(t, {
      answers: { east: 2, west: 1 },
      errors: { ECONNREFUSED: 1, ENOTFOUND: 1, EAI_AGAIN: 1 },
      total: 6,
    });
    assert.equal(describeTally(t), "east 2, west 1, no such name 2, refused 1");
    assert.equal(describeTally(tally([])), "none");
  });

  it("finds where the trailing run of good rounds starts: a lucky round followed by a bad one does not count", () => {
    const ok = (r: Round) => r.outcomes.every((o) => "answer" in o && o.answer === "east");
    assert.equal(
      settledFrom([round(0, refused), round(1, east), round(2, refused), round(3, east), round(4, east)], ok),
      3,
    );
    assert.equal(settledFrom([round(0, east), round(1, refused)], ok), undefined);
    assert.equal(settledFrom([], ok), undefined);
  });

  it("judges a failover from the gateway's death to the first round after which every request was answered by a survivor", () => {
    const died = 10_000;
    const rounds = [
      round(10_000, east, refused),
      round(10_200, east, east),
      round(10_400, refused, east),
      round(12_600, east, east),
      round(17_600, east, east),
    ];
    const run = judgeFailover(rounds, died, ["east"]);
    assert.equal(run.failoverS, 2.6);
    assert.equal(run.stableS, 5);
    assert.equal(run.sent, 10);
    assert.equal(run.failedBefore, 2);
    assert.equal(judgeFailover([round(10_000, west)], died, ["east"]).failoverS, undefined);
  });
});

describe("the clusterset hosts file", () => {
  it("names each ClusterSetIP ServiceImport's addresses as <svc>.<ns>.svc.clusterset.local, and nothing else", () => {
    const text = clustersetHosts([
      { metadata: { name: "orders", namespace: "shop" }, spec: { type: "ClusterSetIP", ips: ["10.96.4.5"] } },
      { metadata: { name: "db", namespace: "shop" }, spec: { type: "Headless" } },
      { metadata: { name: "pending", namespace: "shop" }, spec: { type: "ClusterSetIP" } },
      { metadata: { name: "nameless" }, spec: { type: "ClusterSetIP", ips: ["10.96.4.6"] } },
    ]);
    assert.equal(text, "10.96.4.5 orders.shop.svc.clusterset.local\n");
    assert.equal(clustersetHosts([]), "\n");
  });
});

describe("a Pod's resolv.conf", () => {
  it("is what a kubelet writes for dnsPolicy ClusterFirst: the cluster DNS, the namespace's search path, ndots:5", () => {
    assert.equal(
      podResolvConf({ nameserver: "10.96.0.10", namespace: "shop", domain: "cluster.local" }),
      "search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n",
    );
  });
});
