/**
 * ConnectionSpecs for sandbox clusters, for tests of the lean client (which takes a
 * ConnectionSpec, never a kubeconfig). Uses the product's own kubeconfig parser.
 */

import type { SandboxCluster } from "../../sandbox/control-plane.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import { connectionFromKubeconfig as parse } from "../../src/kube/kubeconfig.ts";

/** The cluster's admin connection (client certificate in `system:masters`). */
export function adminConnection(cluster: SandboxCluster): ConnectionSpec {
  return parse(cluster.adminKubeconfig, { allowFilePaths: false });
}

/** A ConnectionSpec from kubeconfig text with inline credentials. */
export function connectionFromKubeconfig(yaml: string): ConnectionSpec {
  return parse(yaml, { allowFilePaths: false });
}
