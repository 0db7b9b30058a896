/** `fleet-mirror run`: the controller. */
import { createMetrics } from "../admin/metrics.ts";
import { alwaysLeading, runAdminSource } from "../admin/run-source.ts";
import { type AdminServer, startAdminServer } from "../admin/server.ts";
import { ConfigError, flagsHelp, parseRunConfig, runFlags } from "../config.ts";
import { loadLocalConnection } from "../kube/local-connection.ts";
import { createLogger } from "../log.ts";
import { Supervisor } from "../supervisor/supervisor.ts";
import { untilSignal } from "./signals.ts";

export const runHelp = `Usage: fleet-mirror run [flags]

Runs the controller: watches credentials Secrets in --namespace, mirrors the exported
Services of every registered remote cluster into the local cluster. SIGTERM/SIGINT
finish in-flight writes and stop; mirrors stay in place.

Flags:
${flagsHelp(runFlags)}
`;

export async function runCommand(argv: readonly string[]): Promise<number> {
  let config: ReturnType<typeof parseRunConfig>;
  try {
    config = parseRunConfig(argv);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`fleet-mirror run: ${error.message}\n\n${runHelp}`);
      return 2;
    }
    throw error;
  }
  if (config === "help") {
    process.stdout.write(runHelp);
    return 0;
  }
  const logger = createLogger(config.logLevel, { actor: "supervisor" }, config.logFile);
  const localConnection = loadLocalConnection(config.kubeconfig, config.context);
  logger.info({ server: localConnection.server, namespace: config.namespace }, "fleet-mirror starting");
  // The admin server reads the controller through getters: it starts first (health
  // and metrics answer while the controller starts) and outlives the Supervisor.
  let supervisor: Supervisor | undefined;
  const leadership = alwaysLeading(config.leaderElectionIdentity);
  const source = runAdminSource(
    () => supervisor,
    () => leadership,
  );
  let admin: AdminServer | undefined;
  if (config.adminAddr !== "")
    admin = await startAdminServer({ addr: config.adminAddr, logger, source, registry: createMetrics(source) });
  supervisor = new Supervisor({ config, localConnection, logger });
  supervisor.start();
  const signal = await untilSignal();
  logger.info({ signal }, "stopping: finishing in-flight writes; mirrors stay in place");
  await supervisor.stop();
  await admin?.close();
  logger.info("stopped");
  return 0;
}
