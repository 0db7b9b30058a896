/**
 * The control plane's certificates and keys, issued by its CA (pki.ts) into its `pki`
 * directory: the API servers' one serving certificate (loopback), the admin's client
 * certificate (`system:masters`), the kube-controller-manager's when one runs, and the
 * service-account signing key pair every API server shares.
 */
import { generateKeyPairSync } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CONTROLLER_MANAGER_USER } from "./controller-manager.ts";
import { type CertificateFiles, issueCertificate } from "./pki.ts";

export interface PlaneCertificates {
  readonly servingCert: CertificateFiles;
  readonly admin: CertificateFiles;
  /** Only when a controller manager runs. */
  readonly controllerManagerClient: CertificateFiles | undefined;
  /** Paths of the service-account key pair (PEM). */
  readonly saPrivate: string;
  readonly saPublic: string;
}

export async function planeCertificates(
  ca: CertificateFiles,
  pki: string,
  options: { readonly controllerManager: boolean },
): Promise<PlaneCertificates> {
  const saKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const servingCert = await issueCertificate(ca, pki, "apiserver", {
    commonName: "kube-apiserver",
    usage: "server",
    altNames: ["IP:127.0.0.1", "DNS:localhost"],
  });
  const admin = await issueCertificate(ca, pki, "admin", {
    commonName: "fleet-admin",
    organizations: ["system:masters"],
    usage: "client",
  });
  const controllerManagerClient = options.controllerManager
    ? await issueCertificate(ca, pki, "kube-controller-manager", {
        commonName: CONTROLLER_MANAGER_USER,
        usage: "client",
      })
    : undefined;
  const saPrivate = join(pki, "sa.key");
  const saPublic = join(pki, "sa.pub");
  await writeFile(saPrivate, saKeys.privateKey.export({ type: "pkcs8", format: "pem" }));
  await writeFile(saPublic, saKeys.publicKey.export({ type: "spki", format: "pem" }));
  return { servingCert, admin, controllerManagerClient, saPrivate, saPublic };
}
