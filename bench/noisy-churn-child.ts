/**
 * Entry of the noisy-neighbour bench's churn process (see noisy-churn.ts, the parent's
 * handle): touches the noisy remote's Services at a set rate on command, and answers
 * with the touches made. A process of its own so that its 200 requests a second share
 * no event loop with the process that measures the quiet clusters' latency.
 */

import { KubeClient } from "../src/kube/client.ts";
import { connectionFromKubeconfig } from "../src/kube/kubeconfig.ts";
import { serveCommands } from "./child-rpc.ts";
import type { ChurnCommand, ChurnReply } from "./noisy-churn.ts";

const TOUCH = "bench.fleet-mirror/touch";
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let client: KubeClient | undefined;

/**
 * Touches `svc-0..svc-(services-1)` of `namespace` round robin at `perS` for `durationMs`,
 * at most 64 requests in flight (a touch that cannot start in its slot is skipped: the
 * rate reported is the one achieved). Resolves with the touches that succeeded.
 */
async function churn(c: KubeClient, command: Extract<ChurnCommand, { op: "churn" }>): Promise<number> {
  const interval = 1000 / command.perS;
  const started = Date.now();
  const until = started + command.durationMs;
  let inFlight = 0;
  let done = 0;
  for (let i = 0; ; i++) {
    const at = started + i * interval;
    if (at >= until) break;
    const wait = at - Date.now();
    if (wait > 1) await sleep(wait);
    if (inFlight >= 64) continue;
    inFlight++;
    const name = `svc-${i % command.services}`;
    void c
      .request("PATCH", `/api/v1/namespaces/${command.namespace}/services/${name}`, {
        body: { metadata: { annotations: { [TOUCH]: `${Date.now()}-${Math.random()}` } } },
        contentType: "application/merge-patch+json",
      })
      .then(
        () => {
          done++;
        },
        // A failed touch is not counted: the rate reported is the one achieved.
        () => {},
      )
      .finally(() => {
        inFlight--;
      });
  }
  while (inFlight > 0) await sleep(20);
  return done;
}

async function handle(command: ChurnCommand): Promise<ChurnReply> {
  switch (command.op) {
    case "connect":
      client = new KubeClient(connectionFromKubeconfig(command.kubeconfig, { allowFilePaths: false }), {
        requestTimeoutMs: 120_000,
      });
      return { id: command.id, ok: true, touches: 0 };
    case "churn": {
      if (!client) throw new Error("churn before connect");
      return { id: command.id, ok: true, touches: await churn(client, command) };
    }
    default: {
      const never: never = command;
      throw new Error(`unknown command ${JSON.stringify(never)}`);
    }
  }
}

serveCommands(handle, () => client?.close());
