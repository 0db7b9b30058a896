/**
 * Who leads: the view of leader election that the admin server, the metrics and the
 * CLI read. With leader election off, this replica always leads (`alwaysLeading`).
 */

export interface Leadership {
  /** --leader-elect was given. */
  readonly enabled: boolean;
  /** This replica holds the Lease (always true when leader election is off). */
  readonly leading: boolean;
  readonly identity: string;
  /** The current holder as last observed in the Lease, if known. */
  readonly holder?: string;
  /** Epoch ms of the last transition of `leading`. */
  readonly since?: number;
}

/** Leadership when leader election is off: this replica always leads. */
export function alwaysLeading(identity: string, since: number = Date.now()): Leadership {
  return { enabled: false, leading: true, identity, since };
}
