# syntax=docker/dockerfile:1
# The Greeting and Echo Service in a container: built with the dev dependencies, run with the
# production ones only, as the unprivileged user of the Node image. Node 24, the newer of the two
# supported versions (22 and 24; package.json's engines: >=22).

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are there; the build is the next step.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
RUN npm run build

FROM node:24-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
# The slim image has no curl: Node itself asks GET /healthz, at PORT, HOST and CONTEXT_PATH as the
# server reads them.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 CMD ["node", "dist/healthcheck.js"]
# Node as PID 1 gets SIGTERM from `docker stop` and shuts down gracefully (the default STOPSIGNAL).
CMD ["node", "dist/server.js"]
