/**
 * Runs the bare restart client (bench/bare-restart.ts) over a fleet's world as a process
 * of its own, bundled once into plain JavaScript (esbuild, as scripts/bundle-entries.ts
 * bundles fleet-mirror's threads), and returns what it measured of itself.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import type { Fleet } from "../test/helpers/fleet.ts";
import type { BareRestartConfig, BareRestartResult } from "./bare-restart.ts";

let bundled: Promise<string> | undefined;

/** bench/bare-restart.ts as one .mjs file in a temporary directory, built once per bench process. */
function bareRestartBundle(): Promise<string> {
  bundled ??= (async () => {
    const outfile = join(mkdtempSync(join(tmpdir(), "bare-restart-")), "bare-restart.mjs");
    await build({
      entryPoints: [join(import.meta.dirname, "bare-restart.ts")],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node24",
      outfile,
      logLevel: "warning",
    });
    return outfile;
  })();
  return bundled;
}

/**
 * One run of the bare client: `clusters` cluster names, each listing `remote` with the
 * remote reader token (as their Secrets do), and the local mirrors with the
 * controller's own token. Plain `node`, no flag: the floor for a Node process.
 */
export async function bareRestartCpu(
  fleet: Fleet,
  remote: string,
  clusters: readonly string[],
): Promise<BareRestartResult> {
  const file = await bareRestartBundle();
  const remoteCluster = fleet.plane.cluster(remote);
  const remoteConnection = {
    server: remoteCluster.server,
    caPem: remoteCluster.caPem,
    token: await fleet.remoteToken(remote),
  };
  const local = fleet.controllerConnection();
  if (local.auth.kind !== "token" || local.caPem === undefined)
    throw new Error("the controller's local connection is not a token over a known CA");
  const config: BareRestartConfig = {
    local: { server: local.server, caPem: local.caPem, token: local.auth.token },
    clusters: clusters.map((name) => ({ name, remote: remoteConnection })),
    gatewayNamespace: "gateway",
  };
  const configFile = join(mkdtempSync(join(tmpdir(), "bare-restart-config-")), "config.json");
  writeFileSync(configFile, JSON.stringify(config), { mode: 0o600 });
  const child = spawn(process.execPath, [file, configFile], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  if (code !== 0) throw new Error(`bare restart client exited ${code}: ${stderr}`);
  return JSON.parse(stdout) as BareRestartResult;
}
