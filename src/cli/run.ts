/** `fleet-mirror run`: the controller. */
import { createMetrics } from "../admin/metrics.ts";
import { runAdminSource } from "../admin/run-source.ts";
import { type AdminServer, startAdminServer } from "../admin/server.ts";
import { type Config, flagsHelp, parseRunConfig, runFlags } from "../config.ts";
import { responseCapBytes } from "../config-limits.ts";
import { systemClock } from "../core/clock.ts";
import { ConfigError } from "../flag-values.ts";
import { startHeapSettle } from "../heap-settle.ts";
import { KubeClient } from "../kube/client.ts";
import { loadLocalConnection } from "../kube/local-connection.ts";
import { LeaderElector } from "../leader/elector.ts";
import { LayoutWatch } from "../leader/layout-watch.ts";
import { alwaysLeading, type Leadership } from "../leader/leadership.ts";
import { ShardCoordinator } from "../leader/shard-coordinator.ts";
import { createLogger, type Logger } from "../log.ts";
import { readHostLimits } from "../supervisor/host-limits.ts";
import { Supervisor } from "../supervisor/supervisor.ts";
import { PROGRAM } from "./program.ts";
import { untilSignal } from "./signals.ts";

/**
 * The run command's flags, for src/cli/commands.ts: taken from this module rather than from
 * config.ts, so that `run` loads config.ts once, inside its bundle (scripts/bundle-entries.ts).
 */
export { runFlags };

export const runHelp = `Usage: ${PROGRAM} run [flags]

Runs the controller: watches credentials Secrets in --namespace, mirrors the exported
Services of every registered remote cluster into the local cluster. SIGTERM/SIGINT
finish in-flight writes and stop; mirrors stay in place.

With --leader-elect, replicas campaign for a coordination.k8s.io Lease and only its
holder runs the controller. A leader that loses the Lease stops writing at once and
exits with code 1; on SIGTERM it finishes its writes, then releases the Lease.

Every Lease name carries the layout (the single leader's, or the shard count), and a
replica takes no Lease while Leases of another layout are live (a rollout that changes
--shards, or turns sharding on or off): it waits, writing nothing, until the old
replicas are gone, so two layouts never write at once.

With --leader-elect --shards S (S > 1), clusters are spread over S shards by a hash of
their name; each shard is held through its own Lease, each replica holds a fair share
and runs actors and writes mirrors only for the clusters of its shards. A replica that
loses one shard's Lease stops that shard's writes and campaigns on; on SIGTERM it
finishes its writes, then releases its Leases, and the others take its shards over.

Flags:
${flagsHelp(runFlags)}
`;

export async function runCommand(argv: readonly string[]): Promise<number> {
  let config: ReturnType<typeof parseRunConfig>;
  try {
    config = parseRunConfig(argv);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${PROGRAM} run: ${error.message}\n\n${runHelp}`);
      return 2;
    }
    throw error;
  }
  if (config === "help") {
    process.stdout.write(runHelp);
    return 0;
  }
  const logger = createLogger(config.logLevel, { actor: "supervisor" }, config.logFile);
  // Before any worker starts: it sets --expose-gc, which the workers then inherit (heap-settle.ts).
  startHeapSettle();
  const localConnection = loadLocalConnection(config.kubeconfig, config.context);
  logger.info({ server: localConnection.server, namespace: config.namespace }, "fleet-mirror starting");
  if (config.dryRun) logger.info("dry run: every write is planned and reported (status, metrics, log), none is made");
  // The admin server reads the controller through getters: it starts first (health
  // and metrics answer while the controller starts, and on a standby) and outlives
  // the Supervisor.
  let supervisor: Supervisor | undefined;
  // The elector has a client of its own: the Supervisor's comes and goes with leadership.
  const leaseClient = config.leaderElect
    ? new KubeClient(localConnection, {
        userAgent: "fleet-mirror/leader-election",
        maxResponseBytes: responseCapBytes(config),
      })
    : undefined;
  const sharded = config.shards > 1;
  // The single leader lists the namespace's Leases to see other layouts (sharded, the membership does).
  const layout = leaseClient && !sharded ? layoutWatch(config, logger) : undefined;
  const elector = leaseClient && layout ? leaderElector(config, leaseClient, logger, layout) : undefined;
  const coordinator =
    leaseClient && sharded
      ? shardCoordinator(config, leaseClient, logger, (held) => supervisor?.setShards(held) ?? Promise.resolve())
      : undefined;
  const always = alwaysLeading(config.leaderElectionIdentity);
  const source = runAdminSource(
    () => supervisor,
    elector && layout
      ? () => withRefusal(elector.leadership(), layout)
      : coordinator
        ? () => coordinator.leadership()
        : () => always,
  );
  let admin: AdminServer | undefined;
  if (config.adminAddr !== "")
    admin = await startAdminServer({ addr: config.adminAddr, logger, source, registry: createMetrics(source) });
  // Read once: the default placement is sized to them for every leadership term alike.
  const hostLimits = readHostLimits(logger);
  let stopping = false;
  const startController = (): void => {
    if (stopping || supervisor) return;
    supervisor = new Supervisor({ config, localConnection, logger, writeFence: leaseClient !== undefined, hostLimits });
    // The writer enforces the renew deadline itself: should this (main) thread stall
    // and neither renew nor exit, writing stops before another replica can lead.
    if (elector) supervisor.setWriteDeadline(writeDeadline(elector.writableForMs()));
    supervisor.start();
  };
  if (elector && layout && leaseClient) {
    // Only the holder of the Lease runs the controller: a standby neither watches the
    // remote clusters nor writes anything but (when it takes it) the Lease. And only once
    // a list sent after the take shows no other layout holding a Lease (layout-guard.ts);
    // one that does means both took at once: this take is released unused.
    let confirmed = false;
    elector.on("started-leading", () => {
      void layout.confirm(systemClock.now()).then(async (ok) => {
        if (ok) {
          confirmed = true;
          startController();
          return;
        }
        logger.error(
          { lease: elector.lease, foreign: layout.foreign.map((f) => f.name) },
          "took the Lease, but Leases of another layout are live: releasing it unused and exiting",
        );
        await elector.stop();
        process.exit(1);
      });
    });
    elector.on("renewed", (writableForMs) => {
      if (confirmed) supervisor?.setWriteDeadline(writeDeadline(writableForMs));
    });
    elector.on("stopped-leading", (reason) => {
      // No overlap with the next leader: the elector gave up `renewDeadline` after its
      // last successful renewal was sent, and nobody can take the Lease before
      // `leaseDuration` after it; the difference (3 s by default) is the margin in
      // which this process must stop writing. So no graceful stop (which would wait
      // for in-flight writes): process.exit ends every worker thread — the local
      // writer first of all — at once, and Kubernetes restarts the Pod, which then
      // campaigns again as a standby.
      logger.error(
        { lease: elector.lease, identity: config.leaderElectionIdentity, reason },
        `leadership lost (${reason}): stopping all writes and exiting`,
      );
      process.exit(1);
    });
    layout.run(leaseClient, config.leaderElectionNamespace);
    elector.run();
  } else if (coordinator) {
    // Sharded: every replica runs the controller (Secrets listed, writer watching) and
    // holds no shard until the coordinator hands it some; the writer is fenced per shard.
    startController();
    coordinator.run();
  } else {
    startController();
  }
  const signal = await untilSignal();
  stopping = true;
  // Sharded: take no shard while the last writes finish (those held are released at the end).
  coordinator?.leave();
  if (supervisor) {
    logger.info({ signal }, "stopping: finishing in-flight writes; mirrors stay in place");
    // While the writes finish the elector keeps renewing the Lease; it is released
    // only once nothing of ours writes any more.
    await supervisor.stop();
  } else {
    logger.info({ signal }, "stopping: standby, not leading");
  }
  await elector?.stop();
  await layout?.stop();
  // Only once nothing of ours writes: the others take the shards over at their next try.
  await coordinator?.stop();
  leaseClient?.close();
  await admin?.close();
  logger.info("stopped");
  return 0;
}

/** `ms` from now on `systemClock`, which every thread of the process reads alike. */
function writeDeadline(ms: number): number {
  return systemClock.now() + ms;
}

function shardCoordinator(
  config: Config,
  client: KubeClient,
  logger: Logger,
  setShards: (held: ReadonlyMap<number, number>) => Promise<void>,
): ShardCoordinator {
  return new ShardCoordinator({
    client,
    namespace: config.leaderElectionNamespace,
    leaseId: config.leaderElectionId,
    identity: config.leaderElectionIdentity,
    shards: config.shards,
    expectedReplicas: config.expectedReplicas,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    logger: logger.child({ component: "shards" }),
    host: { setShards },
  });
}

/** The single leader's view of other layouts' Leases. */
function layoutWatch(config: Config, logger: Logger): LayoutWatch {
  return new LayoutWatch({
    leaseId: config.leaderElectionId,
    shards: 1,
    leaseDurationMs: config.leaseDurationMs,
    retryPeriodMs: config.retryPeriodMs,
    logger: logger.child({ component: "leader-election" }),
  });
}

/** A standby's leadership with why it takes no Lease now, if another layout holds it back. */
function withRefusal(leadership: Leadership, layout: LayoutWatch): Leadership {
  const refused = leadership.leading ? undefined : layout.refused();
  return refused ? { ...leadership, refused } : leadership;
}

function leaderElector(config: Config, client: KubeClient, logger: Logger, layout: LayoutWatch): LeaderElector {
  return new LeaderElector({
    client,
    namespace: config.leaderElectionNamespace,
    name: config.leaderElectionId,
    identity: config.leaderElectionIdentity,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    logger: logger.child({ component: "leader-election" }),
    mayAcquire: () => layout.refused(),
  });
}
