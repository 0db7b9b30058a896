# fleet-mirror controller image.
#
#   docker build -t ghcr.io/fleet-mirror/fleet-mirror:0.1.0 .
#
# Two stages: `build` compiles the TypeScript with the dev dependencies (exactly what
# `npm run build` does for src/ and workers/: tsc -p tsconfig.image.json -> dist/src, dist/workers,
# then scripts/bundle-entries.ts writes each thread entry, the `run` command and the other
# commands as bundles over tsc's files; the sandbox/ tools and the demo stay out of the
# image); `run` holds dist/ alone, runs as uid 65532 (the uid deploy/deployment.yaml sets)
# and needs no writable root filesystem. No node_modules: every module src/main.ts loads is
# a bundle or imports only Node's built-in modules (test/unit/command-bundles.test.ts).
# No HEALTHCHECK: Kubernetes probes /healthz and /readyz on the admin port instead.
#
# Built and run by the tests (test/integration/image.test.ts, `npm test`) on a local
# stand-in for the base that differs only in --build-arg NODE_IMAGE (scripts/image/base.sh,
# docs/DEPLOY.md "The image"). For production, pin NODE_IMAGE by digest
# (node:24-bookworm-slim@sha256:..., the digest docs/DEPLOY.md names).
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the only install script is the `node` devDependency's, which would
# download a second Node 24 binary; the base image's Node 24 runs the build instead
# (its bin link would point at nothing, so it is removed from node_modules/.bin).
RUN npm ci --ignore-scripts --no-audit --no-fund && rm -f node_modules/.bin/node
COPY tsconfig.json tsconfig.image.json ./
COPY src ./src
COPY workers ./workers
COPY scripts/bundle-entries.ts ./scripts/bundle-entries.ts
RUN npx tsc -p tsconfig.image.json && node scripts/bundle-entries.ts dist

FROM ${NODE_IMAGE} AS run
ENV NODE_ENV=production
# A named user for uid/gid 65532 (so the process has a passwd entry and a home path);
# no home directory is created: the root filesystem is read-only at run time.
RUN groupadd --gid 65532 nonroot \
  && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot
WORKDIR /app
# package.json: its "type": "module" makes dist/'s .js files ES modules.
COPY package.json ./package.json
COPY --from=build /app/dist ./dist
# `link` and `check` read the RBAC they create and review from deploy/rbac/ at run time.
COPY deploy/rbac ./deploy/rbac
USER 65532:65532
# The admin server (/metrics, /healthz, /readyz, /status; --admin-addr, default :9999).
EXPOSE 9999
# --no-node-snapshot, --optimize-for-size, --no-maglev, TurboFan's later threshold and
# MALLOC_ARENA_MAX: src/cli/process-flags.ts (≈ 2 + 2.3 MB less per actor thread, lower
# peaks; no mid-tier compiler's code; no optimising of a start's burst; fewer malloc
# arenas for a packed process's threads).
ENV MALLOC_ARENA_MAX=2
ENTRYPOINT ["node", "--no-node-snapshot", "--optimize-for-size", "--no-maglev", "--invocation-count-for-turbofan=15000", "dist/src/main.js"]
CMD ["run"]
