# syntax=docker/dockerfile:1
# The service runs its TypeScript through tsx (a runtime dependency): there is no compile
# step to ship, so the first stage installs everything and type-checks the tree, and the
# final stage installs production dependencies only and copies the checked sources.

FROM node:20-bookworm-slim AS check
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run typecheck

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    HOST=0.0.0.0 \
    DATA_DIR=/app/data \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=check /app/tsconfig.json ./
COPY --from=check /app/src ./src
COPY --from=check /app/migrations ./migrations
# the auth-admin command and seeds/ (npm run seed: mount or copy your own seeds/*.sql here)
COPY --from=check /app/bin ./bin
COPY --from=check /app/seeds ./seeds
COPY --from=check /app/views ./views
COPY --from=check /app/public ./public
# The embedded database and the generated development key live here when DATABASE_URL is unset.
RUN mkdir -p /app/data && chown node:node /app/data
VOLUME ["/app/data"]
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM drains in-flight requests and stops the workers (at most ~25 s; see stop_grace_period).
STOPSIGNAL SIGTERM
CMD ["node", "--import", "tsx", "src/server.ts"]
