/**
 * What the two registration controllers (registry-controller.ts for credentials Secrets,
 * link-controller.ts for Links, SPEC §1 and §15) share: how a kubeconfig from a Secret
 * is judged, and their level-triggered pass.
 *
 * Level-triggered: a list delivers one `change` per object, so recomputing a registry
 * per event would cost O(K²) kubeconfig parses at start-up (K = 1000: minutes of
 * main-thread CPU). Events only mark the registry dirty; one pass runs per turn of the
 * event loop over whatever the store holds then. After `stop`, no pass runs.
 */
import type { Config } from "../config.ts";
import type { ParseOptions } from "../kube/kubeconfig.ts";

/** The operator's flags that decide which kubeconfigs a Secret may hold (SPEC §7). */
export function credentialsParseOptions(config: Config): ParseOptions {
  return { allowFilePaths: config.allowKubeconfigFilePaths, allowInsecure: config.allowInsecureRemotes };
}

export class OncePerTurn {
  readonly #pass: () => void;
  #scheduled = false;
  #stopped = false;

  /** `pass` runs at most once per turn of the event loop, after `schedule` was called. */
  constructor(pass: () => void) {
    this.#pass = pass;
  }

  schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (!this.#stopped) this.#pass();
    });
  }

  stop(): void {
    this.#stopped = true;
  }
}
