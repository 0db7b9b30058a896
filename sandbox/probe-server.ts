/**
 * A gateway's probe endpoint for tests, the demo and the bench: a real HTTP server on one
 * local address (see local-addresses.ts) whose answer the test switches: `ok` (200),
 * `unavailable` (503), `hang` (accepts and never answers), or stopped (connections
 * refused). Counts the probes it received.
 *
 * With `answer`, the same server is a gateway's traffic port (the sandbox's traffic path,
 * traffic.ts): `ok` mode answers every request with that text, the name of the cluster
 * the gateway stands for, so a client counts which cluster answered.
 */
import { createServer, type Server } from "node:http";

export type ProbeServerMode = "ok" | "unavailable" | "hang";

export class ProbeServer {
  readonly address: string;
  /** The body of a 200 answer. */
  readonly answer: string;
  #port: number;
  mode: ProbeServerMode = "ok";
  /** Requests received, by path. */
  readonly requests = new Map<string, number>();
  #server: Server | undefined;

  private constructor(address: string, port: number, answer: string) {
    this.address = address;
    this.answer = answer;
    this.#port = port;
  }

  /** The port it listens on (the one chosen when started with 0). */
  get port(): number {
    return this.#port;
  }

  /** Listens on `address:port` (port 0: any free port); a 200 answer's body is `answer`. */
  static async start(address: string, port = 0, answer = "ok"): Promise<ProbeServer> {
    const probe = new ProbeServer(address, port, answer);
    return probe.#listen(port);
  }

  get received(): number {
    let n = 0;
    for (const count of this.requests.values()) n += count;
    return n;
  }

  /** Stops listening and drops every connection: probes are then refused. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  /** Listens again on the same address and port; a no-op while it listens. */
  async restart(): Promise<void> {
    if (this.#server) return;
    await this.#listen(this.port);
  }

  async #listen(port: number): Promise<ProbeServer> {
    const server = createServer((req, res) => {
      const path = req.url ?? "";
      this.requests.set(path, (this.requests.get(path) ?? 0) + 1);
      if (this.mode === "ok") res.end(this.answer);
      else if (this.mode === "unavailable") {
        res.statusCode = 503;
        res.end("unavailable");
      }
      // hang: never answered; the socket stays open until the client gives up.
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, this.address, () => resolve());
    });
    this.#server = server;
    const bound = server.address();
    if (typeof bound === "object" && bound) this.#port = bound.port;
    return this;
  }
}
