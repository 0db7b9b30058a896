/**
 * A throw-away PKI for the sandbox control plane: one CA, serving certificates for
 * loopback, and client certificates. Uses the `openssl` command line, which every
 * Debian-based machine and image has; nothing here is meant for production keys.
 */
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface CertificateFiles {
  readonly certPath: string;
  readonly keyPath: string;
  readonly certPem: string;
  readonly keyPem: string;
}

async function openssl(args: readonly string[]): Promise<void> {
  try {
    await run("openssl", [...args]);
  } catch (error) {
    throw new Error(`openssl ${args[0] ?? ""} failed: ${(error as Error).message}`, { cause: error });
  }
}

async function load(certPath: string, keyPath: string): Promise<CertificateFiles> {
  const [certPem, keyPem] = await Promise.all([readFile(certPath, "utf8"), readFile(keyPath, "utf8")]);
  return { certPath, keyPath, certPem, keyPem };
}

const ecKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"] as const;

/** A self-signed CA valid for ten years. */
export async function createCa(dir: string, name: string): Promise<CertificateFiles> {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  await openssl([
    "req",
    "-x509",
    "-new",
    ...ecKey,
    "-keyout",
    keyPath,
    "-out",
    certPath,
    "-days",
    "3650",
    "-subj",
    `/CN=${name}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  return load(certPath, keyPath);
}

export interface LeafOptions {
  /** Kubernetes reads the user name from CN and the groups from O. */
  readonly commonName: string;
  readonly organizations?: readonly string[];
  readonly usage: "server" | "client";
  /** Subject alternative names, e.g. `IP:127.0.0.1`, `DNS:localhost` (server certificates). */
  readonly altNames?: readonly string[];
  readonly days?: number;
}

/** A certificate signed by `ca`, written as `<dir>/<name>.crt` and `<name>.key`. */
export async function issueCertificate(
  ca: CertificateFiles,
  dir: string,
  name: string,
  options: LeafOptions,
): Promise<CertificateFiles> {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  const csrPath = join(dir, `${name}.csr`);
  const extPath = join(dir, `${name}.ext`);
  const subject = [...(options.organizations ?? []).map((o) => `/O=${o}`), `/CN=${options.commonName}`].join("");
  const ext = [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    `extendedKeyUsage=${options.usage === "server" ? "serverAuth" : "clientAuth"}`,
    ...(options.altNames && options.altNames.length > 0 ? [`subjectAltName=${options.altNames.join(",")}`] : []),
  ];
  await writeFile(extPath, `${ext.join("\n")}\n`);
  await openssl(["req", "-new", ...ecKey, "-keyout", keyPath, "-out", csrPath, "-subj", subject]);
  await openssl([
    "x509",
    "-req",
    "-in",
    csrPath,
    "-CA",
    ca.certPath,
    "-CAkey",
    ca.keyPath,
    "-CAcreateserial",
    "-days",
    String(options.days ?? 365),
    "-extfile",
    extPath,
    "-out",
    certPath,
  ]);
  return load(certPath, keyPath);
}
