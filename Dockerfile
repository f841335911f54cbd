# The bins run dist/, the JavaScript bundles `npm run build` makes from src/ with esbuild (a
# runtime dependency, like tsx, which runs the sources when dist/ is missing or older than them).
# One image for the nodes (`node bin/tickraft serve …`) and the demo sink (`node bin/tickctl sink …`);
# docker-compose.yml runs a 3-node cluster and the sink from it.
FROM node:20-slim
WORKDIR /app
ENV NODE_ENV=production
# Dependencies first, so a source change does not reinstall them. classic-level ships prebuilt
# binaries for linux-x64 and linux-arm64 glibc, so no compiler is needed.
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build dist/ from sources that are not copied yet.
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY tsconfig.json ./
COPY bin ./bin
COPY proto ./proto
COPY src ./src
COPY scripts/build.ts ./scripts/
RUN npm run build
# Data lives on a volume; the node user owns it.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
# Client API, peer transport, metrics/health (each node of the compose file shifts them by one).
EXPOSE 7001 7101 9101
CMD ["node", "bin/tickraft", "serve", "--help"]
