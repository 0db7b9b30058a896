/**
 * What the admin HTTP server reads from the running process. The server never reaches
 * into the controller: `fleet-mirror run` builds one AdminSource from its Supervisor
 * (while this replica leads) and its leader elector, and the server only calls these.
 */
import type { Leadership } from "../leader/leadership.ts";
import type { FleetStatus } from "../status/fleet-view.ts";

export interface Check {
  readonly ok: boolean;
  /** Why not ok (or a note such as "standby: not leading"). */
  readonly reason?: string;
}

/** JSON served at /status and read by `fleet-mirror status`. */
export interface AdminStatus extends Partial<FleetStatus> {
  readonly leadership: Leadership;
  /** Epoch ms when this document was made. */
  readonly time: number;
}

export interface AdminSource {
  /** Fleet status while this replica runs the controller; undefined on a standby. */
  fleet(): FleetStatus | undefined;
  leadership(): Leadership;
  /** /healthz: the process and (while leading) its local writer are alive. */
  healthy(): Check;
  /** /readyz: the local writer is synced; never gated on remote clusters; true on a standby. */
  ready(): Check;
}
