/**
 * How the lean client reaches one API server: the URL, a keep-alive agent with its TLS
 * material, and the request headers (with a bearer token, re-read from its file when
 * the auth is `token-file`).
 *
 * One agent per client, built from the ConnectionSpec (CA, client certificate, SNI name,
 * skip-verify); `close()` destroys it and every socket, idle or in use.
 */
import { readFileSync } from "node:fs";
import type * as HttpModule from "node:http";
import type * as HttpsModule from "node:https";
import type * as TlsModule from "node:tls";
import type { ConnectionSpec } from "../core/connection.ts";

// Not `import * as http from "node:http"`: an ESM namespace import of node:http reads
// every export, and one of them is a lazy getter that loads undici (fetch, HTTP/2):
// +31 ms of CPU in every actor thread's start (measured: 78 vs 47 ms per thread).
// getBuiltinModule returns the CommonJS module object, touching nothing.
export const http: typeof HttpModule = process.getBuiltinModule("node:http");
const https: typeof HttpsModule = process.getBuiltinModule("node:https");
// node:tls likewise: its namespace reads `rootCertificates`, which builds Node's ≈ 120
// root certificates as strings in every thread that imports it (none is used here: a
// client trusts its kubeconfig's CA, or the default store inside OpenSSL).
const tls: typeof TlsModule = process.getBuiltinModule("node:tls");

/** Query parameters; `undefined` values are left out. */
export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

const TOKEN_FILE_REREAD_MS = 60_000;

export class ApiTransport {
  /** The server URL without trailing slashes, as errors name it. */
  readonly server: string;
  readonly #url: URL;
  readonly #module: typeof http | typeof https;
  readonly #agent: HttpModule.Agent;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #tokenFile: { readonly path: string; token: string; readAt: number } | undefined;
  readonly #servername: string | undefined;

  /** Throws when `connection.server` is not an absolute http(s) URL. */
  constructor(connection: ConnectionSpec, userAgent: string) {
    let url: URL;
    try {
      url = new URL(connection.server);
    } catch (error) {
      throw new Error(`invalid API server URL ${JSON.stringify(connection.server)}`, { cause: error });
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw new Error(`API server URL must be http(s): ${connection.server}`);
    }
    this.server = connection.server.replace(/\/+$/, "");
    this.#url = url;
    this.#servername = connection.tlsServerName;
    const headers: Record<string, string> = { accept: "application/json", "user-agent": userAgent };
    if (connection.auth.kind === "token") headers["authorization"] = `Bearer ${connection.auth.token}`;
    this.#headers = headers;
    this.#tokenFile =
      connection.auth.kind === "token-file" ? { path: connection.auth.path, token: "", readAt: 0 } : undefined;
    if (url.protocol === "https:") {
      this.#module = https;
      // One SecureContext per client: given ca/cert/key instead, every new connection
      // parses the PEMs again (a burst of connections then costs milliseconds each).
      const secureContext = tls.createSecureContext({
        ...(connection.caPem !== undefined ? { ca: connection.caPem } : {}),
        ...(connection.auth.kind === "client-certificate"
          ? { cert: connection.auth.certPem, key: connection.auth.keyPem }
          : {}),
      });
      this.#agent = new https.Agent({
        keepAlive: true,
        // No TLS session cache. The agent caches each connection's session ticket for a
        // later resumption, as a Buffer that views a pooled 64 KB allocation shared with
        // a few other sessions: a packed thread's 125 agents kept ≈ 2 MB of such chunks
        // alive (≈ 17 KB per cluster, outside the heap). A client holds one long-lived
        // keep-alive connection (its watch), so a resumption would only shorten the
        // handshake of a reconnection, which is rare.
        maxCachedSessions: 0,
        rejectUnauthorized: connection.insecureSkipTlsVerify !== true,
        secureContext,
        ...(connection.tlsServerName !== undefined ? { servername: connection.tlsServerName } : {}),
      });
    } else {
      this.#module = http;
      this.#agent = new http.Agent({ keepAlive: true });
    }
  }

  /** Starts one request; the caller ends it and listens for its events. */
  request(
    method: string,
    path: string,
    query: Query | undefined,
    extraHeaders: Record<string, string>,
    onResponse: (res: HttpModule.IncomingMessage) => void,
  ): HttpModule.ClientRequest {
    return this.#module.request(
      this.#target(path, query),
      {
        method,
        headers: { ...this.#currentHeaders(), ...extraHeaders },
        agent: this.#agent,
        ...(this.#servername !== undefined ? { servername: this.#servername } : {}),
      },
      onResponse,
    );
  }

  /** Destroys the agent and every socket, idle or in use. */
  close(): void {
    this.#agent.destroy();
  }

  /** The request headers; with `token-file` auth, the token as last read (re-read each minute). */
  #currentHeaders(): Record<string, string> {
    const headers: Record<string, string> = { ...this.#headers };
    const file = this.#tokenFile;
    if (file) {
      if (Date.now() - file.readAt > TOKEN_FILE_REREAD_MS) {
        try {
          file.token = readFileSync(file.path, "utf8").trim();
          file.readAt = Date.now();
        } catch {
          // Keep the last token; the API server's 401 will say what is wrong.
        }
      }
      if (file.token) headers["authorization"] = `Bearer ${file.token}`;
    }
    return headers;
  }

  #target(path: string, query: Query | undefined): URL {
    const url = new URL(this.#url.href);
    url.pathname = url.pathname.replace(/\/+$/, "") + path;
    if (query) {
      for (const [name, value] of Object.entries(query)) {
        if (value !== undefined) url.searchParams.set(name, String(value));
      }
    }
    return url;
  }
}
