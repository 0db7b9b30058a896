/**
 * How many writes in flight the local API server turns into throughput: a bare client
 * PUTs N small EndpointSlices (one endpoint each, a fleet-wide part's shape), flipping
 * their endpoint's readiness, with C requests in flight, for each C in turn, on one local
 * API server (the sandbox control plane, with kube-controller-manager). Prints per C the
 * writes per second and the mean request latency. The question it answers for the tier
 * switch (failover-tiers): does sending a Service's parts together (more in flight) buy
 * throughput, or only latency, on this machine now?
 *
 * Usage: node bench/probes/write-concurrency-probe.ts [N=1200] [C…=1 8 16 32 64 128]
 */
import { loadavg } from "node:os";
import type { EndpointSlice } from "../../src/core/objects.ts";
import { Fleet } from "../../test/helpers/fleet.ts";
import { localAdminClient, round, runPool } from "../harness.ts";

const [n = "1200", ...cs] = process.argv.slice(2);
const count = Number(n);
const widths = cs.length > 0 ? cs.map(Number) : [1, 8, 16, 32, 64, 128];
const NAMESPACE = "probe";
const path = `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices`;

const fleet = await Fleet.start([]);
try {
  await fleet.ensureNamespace("local", NAMESPACE);
  const client = localAdminClient(fleet);
  const slices = new Map<string, EndpointSlice>();
  await runPool(
    Array.from({ length: count }, (_, i) => i),
    16,
    async (i) => {
      const created = await client.request<EndpointSlice>("POST", path, {
        body: {
          apiVersion: "discovery.k8s.io/v1",
          kind: "EndpointSlice",
          metadata: { name: `part-${i}-ipv4`, labels: { "kubernetes.io/service-name": `svc-${i}` } },
          addressType: "IPv4",
          endpoints: [{ addresses: [`198.18.${i >> 8}.${i & 255}`], conditions: { ready: true } }],
          ports: [{ name: "http", port: 4143, protocol: "TCP" }],
        },
      });
      slices.set(`part-${i}-ipv4`, created);
    },
  );
  let ready = true;
  for (const width of widths) {
    ready = !ready;
    const latencies: number[] = [];
    const started = performance.now();
    await runPool([...slices.keys()], width, async (name) => {
      const slice = slices.get(name) as EndpointSlice;
      const body = { ...slice, endpoints: (slice.endpoints ?? []).map((e) => ({ ...e, conditions: { ready } })) };
      const t = performance.now();
      const updated = await client.request<EndpointSlice>("PUT", `${path}/${name}`, { body });
      latencies.push(performance.now() - t);
      slices.set(name, updated);
    });
    const seconds = (performance.now() - started) / 1000;
    const mean = latencies.reduce((a, b) => a + b, 0) / latencies.length;
    process.stdout.write(
      `in flight ${String(width).padStart(3)}: ${round(count / seconds, 1)} writes/s, mean latency ${round(mean, 1)} ms (load ${loadavg()
        .map((l) => round(l, 1))
        .join(" ")})\n`,
    );
  }
} finally {
  await fleet.stop();
}
