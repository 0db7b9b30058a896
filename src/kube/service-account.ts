/**
 * Mints a bearer token for a ServiceAccount bound to a Role or ClusterRole, through
 * the TokenRequest API (API servers no longer create token Secrets by themselves).
 * Every step is create-or-reuse, so calling it twice is harmless.
 */
import { CoreV1Api, type KubeConfig, RbacAuthorizationV1Api, type V1PolicyRule } from "@kubernetes/client-node";

export interface ServiceAccountTokenRequest {
  readonly namespace: string;
  readonly serviceAccount: string;
  /**
   * The role to bind. `rules` given: the Role/ClusterRole is created (or replaced) with
   * them. `rules` omitted: the role must exist already (e.g. a built-in ClusterRole).
   * A `Role` is bound in `namespace`; a `ClusterRole` is bound cluster-wide unless
   * `bindInNamespace` is set, then with a RoleBinding in `namespace`.
   */
  readonly role: {
    readonly kind: "Role" | "ClusterRole";
    readonly name: string;
    readonly rules?: readonly V1PolicyRule[];
    readonly bindInNamespace?: boolean;
  };
  /** Token lifetime; default one day. The API server may shorten it. */
  readonly expirationSeconds?: number;
}

function isConflict(error: unknown): boolean {
  return typeof error === "object" && error !== null && "code" in error && (error as { code: unknown }).code === 409;
}

async function createOrReuse(create: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (error) {
    if (!isConflict(error)) throw error;
  }
}

export async function mintServiceAccountToken(kc: KubeConfig, req: ServiceAccountTokenRequest): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const { namespace, serviceAccount, role } = req;

  await createOrReuse(() => core.createNamespace({ body: { metadata: { name: namespace } } }));
  await createOrReuse(() =>
    core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: serviceAccount, namespace } } }),
  );
  if (role.rules) {
    const rules = [...role.rules];
    if (role.kind === "Role") {
      const body = { metadata: { name: role.name, namespace }, rules };
      await createOrReuse(() => rbac.createNamespacedRole({ namespace, body }));
      await rbac.replaceNamespacedRole({ name: role.name, namespace, body });
    } else {
      const body = { metadata: { name: role.name }, rules };
      await createOrReuse(() => rbac.createClusterRole({ body }));
      await rbac.replaceClusterRole({ name: role.name, body });
    }
  }
  const subjects = [{ kind: "ServiceAccount", name: serviceAccount, namespace }];
  const roleRef = { apiGroup: "rbac.authorization.k8s.io", kind: role.kind, name: role.name };
  const bindingName = `${serviceAccount}-${role.name}`;
  if (role.kind === "ClusterRole" && !role.bindInNamespace) {
    await createOrReuse(() =>
      rbac.createClusterRoleBinding({ body: { metadata: { name: `${namespace}-${bindingName}` }, subjects, roleRef } }),
    );
  } else {
    await createOrReuse(() =>
      rbac.createNamespacedRoleBinding({
        namespace,
        body: { metadata: { name: bindingName, namespace }, subjects, roleRef },
      }),
    );
  }
  const tokenRequest = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: req.expirationSeconds ?? 86_400 } },
  });
  const token = tokenRequest.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  return token;
}
