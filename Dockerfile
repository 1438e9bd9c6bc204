# syntax=docker/dockerfile:1
# The first stage installs everything, type-checks the tree and compiles src/ to dist/ (plain
# JavaScript); the final stage installs production dependencies only and runs dist/ with
# plain node: no TypeScript, tsx or esbuild in the image.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run typecheck && npm run build

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    HOST=0.0.0.0 \
    DATA_DIR=/app/data \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY package.json package-lock.json ./
# tsx is a dependency so that `npm start` runs the sources on a fresh clone; the image runs
# compiled JavaScript, so tsx and the esbuild binary it brings are removed.
RUN npm ci --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/tsx node_modules/esbuild node_modules/@esbuild node_modules/.bin/tsx node_modules/.bin/esbuild \
  && npm cache clean --force
COPY --from=build /app/dist ./dist
# dist/ finds these relative to itself (../views, ../public, ../migrations)
COPY --from=build /app/migrations ./migrations
COPY --from=build /app/views ./views
COPY --from=build /app/public ./public
# `npm run admin` / `npm run migrate` in the container run dist/ through this launcher
COPY --from=build /app/scripts/launch.mjs ./scripts/launch.mjs
# lowers libuv's pool, where bcrypt hashes, below the event loop (loaded by CMD's --require)
COPY --from=build /app/scripts/pool-priority.cjs ./scripts/pool-priority.cjs
# the auth-admin command and seeds/ (npm run seed: mount or copy your own seeds/*.sql here)
COPY --from=build /app/bin ./bin
COPY --from=build /app/seeds ./seeds
# The embedded database and the generated development key live here when DATABASE_URL is unset.
RUN mkdir -p /app/data && chown node:node /app/data
VOLUME ["/app/data"]
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM drains in-flight requests and stops the workers (at most ~25 s; see stop_grace_period).
STOPSIGNAL SIGTERM
# V8's young generation held to 4 MiB semi-spaces, as `npm start` does: under load V8 grows them
# to 16 MiB and keeps them, about 20-40 MB more resident, for 3-5% more throughput on the hot paths
# (docs/performance.md, "Memory at rest and under load"); libuv's pool, where bcrypt hashes, at nice
# +10 (scripts/pool-priority.cjs; docs/performance.md, "Logins and the event loop").
CMD ["node", "--max-semi-space-size=4", "--require=./scripts/pool-priority.cjs", "dist/server.js"]
