/**
 * Is there a short CPU-bound task worth a piscina pool? Compares computing the desired
 * mirrors of a 2 000-Service cluster with the cost of merely handing that input to
 * another thread and the result back (structured clone). Usage: node bench/probes/pool-offload-probe.ts
 */
import { desiredMirrors } from "../../src/core/desired.ts";
import type { Service } from "../../src/core/objects.ts";

const N = 2000;
const services: Service[] = [
  {
    metadata: { name: "gateway", namespace: "gateway", resourceVersion: "1" },
    spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143 }] },
    status: { loadBalancer: { ingress: [{ ip: "198.18.0.1" }] } },
  },
];
for (let i = 0; i < N; i++)
  services.push({
    metadata: {
      name: `svc-${i}`,
      namespace: "shop",
      resourceVersion: String(i + 10),
      annotations: { "mirror.linkerd.io/gateway-name": "gateway", "mirror.linkerd.io/gateway-ns": "gateway" },
      labels: { app: `svc-${i}` },
    },
    spec: {
      ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
      selector: { app: `svc-${i}` },
      clusterIP: "10.0.0.1",
    },
  });
const byKey = new Map(services.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s]));
const settings = {
  name: "east",
  domain: "cluster.local",
  excludedNamespaces: ["kube-system"],
  defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
};
const time = (label: string, fn: () => void, reps = 50) => {
  for (let i = 0; i < 5; i++) fn();
  const t = performance.now();
  for (let i = 0; i < reps; i++) fn();
  process.stdout.write(`${label} ${((performance.now() - t) / reps).toFixed(3)} ms\n`);
};
time(`desiredMirrors(${N} services)`, () =>
  desiredMirrors(
    settings,
    services,
    (k) => byKey.get(k),
    () => undefined,
  ),
);
time(`structuredClone(${N} services) [the cost of handing the input to a pool thread]`, () =>
  structuredClone(services),
);
const out = desiredMirrors(
  settings,
  services,
  (k) => byKey.get(k),
  () => undefined,
);
time(`structuredClone(${N} mirrors) [handing the result back]`, () => structuredClone([...out.mirrors.values()]));
