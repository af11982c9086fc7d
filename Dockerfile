# syntax=docker/dockerfile:1
# The Greeting and Echo Service in a container: built with the dev dependencies, run with the
# production ones only, as the unprivileged user of the Node image. Node 24, the newer of the two
# supported versions (22 and 24; package.json's engines: >=22).

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
COPY packages/conformance/package.json ./packages/conformance/
# --ignore-scripts: `prepare` would build before the sources are there; the build is the next step.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json buf.yaml buf.gen.yaml ./
COPY proto ./proto
COPY src ./src
COPY packages/client/src ./packages/client/src
COPY packages/conformance/src ./packages/conformance/src
COPY scripts ./scripts
# The build's identity, as the labels below say it. The commit and the time (CREATED, RFC 3339, as
# SOURCE_DATE_EPOCH) are what scripts/build-info.js writes into dist for GET /version; there is no
# .git here, so without REVISION the commit is `unknown`, and without CREATED the time is the
# build's clock. A VERSION that is not package.json's stops the build: the label would lie.
ARG VERSION
ARG REVISION
ARG CREATED
RUN test -z "$VERSION" || test "$VERSION" = "$(node -p 'require("./package.json").version')" \
      || { echo "VERSION $VERSION is not package.json's version" >&2; exit 1; }
RUN epoch="" && if [ -n "$CREATED" ]; then epoch="$(date -u -d "$CREATED" +%s)"; fi \
 && SOURCE_COMMIT="$REVISION" SOURCE_DATE_EPOCH="$epoch" npm run build

FROM node:24-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# The workspace's packages: the kit, which `greeting-service conformance` runs, and the client's
# manifest alone, which npm wants to see for the workspace.
COPY packages/client/package.json ./packages/client/
COPY packages/conformance/package.json ./packages/conformance/
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/proto ./proto
COPY --from=build /app/packages/conformance/dist ./packages/conformance/dist
# The OCI annotations (image-spec annotations.md): the build's from the build arguments, the rest
# as package.json says them. Declared after the dependencies' layers, which a new commit leaves cached.
ARG VERSION
ARG REVISION
ARG CREATED
ARG SOURCE
LABEL org.opencontainers.image.title="greeting-service" \
      org.opencontainers.image.description="Greeting and Echo Service: a reference JSON-over-HTTP API and test target for HTTP clients" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.created="$CREATED" \
      org.opencontainers.image.source="$SOURCE"
USER node
EXPOSE 8080
# The slim image has no curl: Node itself asks GET /healthz, at PORT, HOST and CONTEXT_PATH as the
# server reads them.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 CMD ["node", "dist/healthcheck.js"]
# Node as PID 1 gets SIGTERM from `docker stop` and shuts down gracefully (the default STOPSIGNAL).
CMD ["node", "dist/server.js"]
