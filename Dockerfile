# fleet-mirror controller image.
# Build stage: dev dependencies + TypeScript compile. Run stage: production
# dependencies only, non-root, `node dist/src/main.js`.
# Kept in step with the build: `npm run build` uses the same tsconfig.build.json.

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency's install script fetches a Node binary
# that the image does not need (node:24 is the base).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
RUN npx tsc -p tsconfig.build.json

FROM node:24-slim AS run
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The `node` user (uid 1000) exists in the official image.
USER 1000:1000
ENTRYPOINT ["node", "dist/src/main.js"]
CMD ["run"]
