/**
 * The pre-bundled thread entries (`npm run build`, scripts/bundle-entries.ts): each is
 * one file that needs nothing at run time but Node's built-in modules, and runs as its
 * thread. The bundles are written to a temporary directory outside the repository, so
 * a bundle that still imported a package or a module of src/ would fail to load there.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MessageChannel, Worker } from "node:worker_threads";
import type { Metafile } from "esbuild";
import { bundleEntries, THREAD_ENTRIES } from "../../scripts/bundle-entries.ts";
import { decodeFromRemoteActor, decodeFromWriter, type ToRemoteActor } from "../../src/protocol/messages.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The whole heap snapshot of `worker`, as text. */
async function snapshotText(worker: Worker): Promise<string> {
  let heap = "";
  for await (const chunk of await worker.getHeapSnapshot()) heap += String(chunk);
  return heap;
}

/** The first message of `worker` that `match` accepts; rejects if the thread exits first. */
function nextMessage(worker: Worker, match: (m: { type?: unknown }) => boolean): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type?: unknown }): void => {
      if (!match(m)) return;
      worker.off("message", onMessage);
      resolve(m);
    };
    worker.on("message", onMessage);
    worker.once("exit", (code) => reject(new Error(`thread exited (code ${code}) before the expected message`)));
    worker.once("error", reject);
  });
}

/** Each step of a thread's test is bounded: a hang fails that step, named, instead of the whole file's timeout. */
const STEP_MS = 60_000;

/** `promise`, or a rejection naming `step` once STEP_MS has passed without it settling. */
async function within<T>(step: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${step}: nothing after ${STEP_MS} ms`)), STEP_MS);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

describe("bundled thread entries", () => {
  let dir = "";
  let metafile: Metafile;
  const workers: Worker[] = [];
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "fleet-mirror-bundles-"));
    metafile = await bundleEntries(dir);
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.terminate()));
    rmSync(dir, { recursive: true, force: true });
  });
  const bundle = (entry: string): URL => pathToFileURL(join(dir, entry.replace(/\.ts$/, ".js")));

  it("each entry is one file that imports only Node's built-in modules", () => {
    const outputs = Object.entries(metafile.outputs).filter(([file]) => file.endsWith(".js"));
    assert.equal(outputs.length, THREAD_ENTRIES.length);
    for (const [file, output] of outputs) {
      const runtime = output.imports.filter((i) => i.external).map((i) => i.path);
      assert.deepEqual(
        runtime.filter((path) => !isBuiltin(path)),
        [],
        `${file} imports at run time`,
      );
      // The packages the threads use are inside the bundle, not loaded beside it; the
      // actor threads log without pino (src/log/thread-logger.ts), the writer with it.
      const inputs = Object.keys(output.inputs);
      const holds = (name: string): boolean => inputs.some((i) => i.startsWith(`node_modules/${name}/`));
      assert.ok(holds("valibot"), `${file} holds valibot`);
      assert.equal(holds("pino"), file.includes("local-writer"), `${file} holds pino only in the writer's bundle`);
      // Pure ASCII: V8 keeps a source with any other character at two bytes per character.
      const source = readFileSync(resolve(ROOT, file), "utf8");
      assert.equal(/[^\x20-\x7e\n\t]/.exec(source)?.[0], undefined, `${file} is ASCII`);
    }
  });

  it("the bundled remote-cluster entry starts an actor (actor.ready) and stops it (actor.stopped)", async () => {
    const worker = new Worker(bundle("workers/remote-cluster/entry.ts"), { stdout: true, stderr: true });
    workers.push(worker);
    const { port1, port2 } = new MessageChannel();
    const init: ToRemoteActor = {
      type: "actor.init",
      cluster: {
        name: "east",
        domain: "cluster.local",
        excludedNamespaces: [],
        defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
      },
      epoch: 1,
      connection: { server: "https://127.0.0.1:1", auth: { kind: "anonymous" } },
      options: {
        resolvePeriodMs: 60_000,
        maxInFlight: 2,
        batchDelayMs: 10,
        logLevel: "info",
        memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
      },
      writerPort: port1,
    };
    worker.postMessage(init, [port1]);
    const ready = decodeFromRemoteActor(
      await within(
        "actor.ready",
        nextMessage(worker, (m) => m.type !== "actor.status"),
      ),
    );
    assert.deepEqual(ready, { type: "actor.ready", cluster: "east", epoch: 1 });
    // Its TLS client did not build Node's root certificates as strings (src/kube/transport.ts).
    const heap = await within("the thread's heap snapshot", snapshotText(worker));
    assert.ok(heap.includes("__fleetMirrorCreateRequire"), "the snapshot is the bundle's thread");
    assert.equal(heap.includes("-----BEGIN CERTIFICATE-----"), false, "no root certificate on the thread's heap");
    worker.postMessage({ type: "actor.stop", cluster: "east" });
    const stopped = decodeFromRemoteActor(
      await within(
        "actor.stopped",
        nextMessage(worker, (m) => m.type === "actor.stopped"),
      ),
    );
    assert.deepEqual(stopped, { type: "actor.stopped", cluster: "east", epoch: 1 });
    port2.close();
    // The thread ends once its last actor stopped.
    const [code] = await within("the thread's exit after its last actor stopped", once(worker, "exit"));
    assert.equal(code, 0);
  });

  it("the bundled local-writer entry reports a message that does not decode and stops on writer.stop", async () => {
    const worker = new Worker(bundle("workers/local-writer/entry.ts"), { stdout: true, stderr: true });
    workers.push(worker);
    let output = "";
    worker.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    worker.postMessage({ type: "writer.clusters", keep: "east" });
    worker.postMessage({ type: "writer.stop" });
    const stopped = decodeFromWriter(await nextMessage(worker, (m) => m.type === "writer.stopped"));
    assert.equal(stopped.type, "writer.stopped");
    await once(worker, "exit");
    const line = JSON.parse(output.split("\n")[0] ?? "") as { msg?: unknown; err?: { message?: unknown } };
    assert.equal(line.msg, "protocol error: message dropped");
    assert.match(String(line.err?.message), /^writer\.clusters: keep: /);
  });
});
