/**
 * What 1 000 probed gateways cost one actor (SPEC §10): the CPU of the actor's thread
 * and its event-loop delay while it probes 1 000 gateway addresses, each answering 200,
 * or each accepting and never answering (every probe a timeout).
 *
 * The probe servers run in a child process (probe-servers.ts: their CPU is not counted), on
 * 250 addresses of 198.51.100.0/24 made local for the run (sandbox/local-addresses.ts) × 4
 * ports. The whole controller's probing CPU against a bare client is the probe-cpu
 * scenario of `npm run bench`; this probe isolates one actor's thread and its event loop.
 * Nothing leaves the machine. Needs CAP_NET_ADMIN for the route.
 *
 *   node bench/probes/gateway-probe-load.ts [--seconds 20] [--period 1] [--mode ok|hang]
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { makeLocal } from "../../sandbox/local-addresses.ts";
import { systemClock } from "../../src/core/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { GatewayProber } from "../../workers/remote-cluster/gateway-prober.ts";
import { httpProbe } from "../../workers/remote-cluster/http-probe.ts";
import { ProbeServers } from "../probe-servers.ts";

const ADDRESSES = 250;
const PORTS = [4191, 4192, 4193, 4194];
const address = (i: number): string => `198.51.100.${i + 1}`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "20" },
      period: { type: "string", default: "1" },
      mode: { type: "string", default: "ok" },
    },
  });
  if (values.mode !== "ok" && values.mode !== "hang") throw new Error("--mode: ok or hang");
  const route = await makeLocal("198.51.100.0/24");
  const addresses = Array.from({ length: ADDRESSES }, (_, i) => address(i));
  let servers: ProbeServers | undefined;
  try {
    servers = await ProbeServers.start(addresses.flatMap((a) => PORTS.map((port) => ({ address: a, port }))));
    await servers.setMode(addresses, values.mode);
    const periodMs = Number(values.period) * 1000;
    let probes = 0;
    let changes = 0;
    const prober = new GatewayProber({
      clock: systemClock,
      random: Math.random,
      probe: httpProbe,
      userAgent: "bench",
      log: silentLogger(),
      guard: (fn) => fn,
      livenessChanged: () => {
        changes += 1;
      },
      probed: () => {
        probes += 1;
      },
      // The load of every gateway probed at once, as measured before the cap existed.
      maxInFlight: Number.POSITIVE_INFINITY,
    });
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < ADDRESSES; i++)
      for (const port of PORTS) prober.set(`gw-${i}/gateway-${port}`, { port, path: "/ready", periodMs }, [address(i)]);
    await new Promise((resolve) => setTimeout(resolve, Number(values.seconds) * 1000));
    const used = process.cpuUsage(cpu);
    const wallMs = performance.now() - started;
    prober.stop();
    delay.disable();
    const cpuMs = (used.user + used.system) / 1000;
    const row = {
      gateways: ADDRESSES * PORTS.length,
      mode: values.mode,
      periodS: periodMs / 1000,
      wallS: +(wallMs / 1000).toFixed(1),
      probes,
      livenessChanges: changes,
      cpuMs: Math.round(cpuMs),
      cpuPercentOfOneCore: +((100 * cpuMs) / wallMs).toFixed(1),
      cpuUsPerProbe: probes > 0 ? Math.round((1000 * cpuMs) / probes) : null,
      loopDelayP99Ms: +(delay.percentile(99) / 1e6).toFixed(1),
      loopDelayMaxMs: +(delay.max / 1e6).toFixed(1),
      rssMb: Math.round(process.memoryUsage().rss / 2 ** 20),
    };
    process.stdout.write(`${JSON.stringify(row)}\n`);
  } finally {
    await servers?.stop();
    await route.release();
  }
}

await main();
