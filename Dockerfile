# callplane's image: the API, the workers (SIP and RTP) and the web console in one image; the role
# is the command (`serve --role api|worker|all`, `migrate`). docs/deploy.md says how to build it
# with Docker, Podman or Buildah, and scripts/check-image-steps.sh checks these steps on Debian.
#
#   docker build -t callplane .            podman build -t callplane .            buildah bud -t callplane .
#
# NODE_IMAGE: Node 20 on Debian bookworm slim (the official image); any image with the same Node
# and Debian release will do (a mirror, or one made without a registry: docs/deploy.md).
ARG NODE_IMAGE=node:20-bookworm-slim

# --- build: dependencies (with dev tools), the server (tsc) and the console (vite) --------------
FROM ${NODE_IMAGE} AS build
# better-sqlite3 compiles from source where no prebuilt binary can be fetched.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
# The `prepare` script builds; the sources are not here yet, so scripts run after they are.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY sdk ./sdk
COPY src ./src
COPY console ./console
# Native modules build against the image's own Node headers (nodedir: the prefix node is installed
# under), never against headers downloaded at build time.
# onnxruntime-node (the Silero VAD) ships its library for every OS and CPU, about 290 MB: only this
# image's is kept.
RUN npm_config_nodedir="$(dirname "$(dirname "$(command -v node)")")" npm rebuild \
 && npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && find node_modules/onnxruntime-node/bin -mindepth 2 -maxdepth 2 ! -name linux -exec rm -rf {} + \
 && find node_modules/onnxruntime-node/bin -mindepth 3 -maxdepth 3 -path '*/linux/*' ! -name "$(node -p process.arch)" -exec rm -rf {} +

# --- runtime: Node, the offline speech engines, the built service -------------------------------
FROM ${NODE_IMAGE}
# espeak-ng speaks and pocketsphinx listens (the offline default, docs/voice.md); tini reaps and
# forwards signals, so SIGTERM reaches the process that drains.
RUN apt-get update \
 && apt-get install -y --no-install-recommends espeak-ng pocketsphinx pocketsphinx-en-us tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 callplane \
 && useradd --system --uid 10001 --gid callplane --home-dir /var/lib/callplane --create-home --shell /usr/sbin/nologin callplane
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin ./bin
COPY --from=build /src/sdk ./sdk
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/var/lib/callplane \
    CALLPLANE_METRICS_PORT=9464
USER callplane
VOLUME ["/var/lib/callplane"]
# HTTP (API, console, /metrics of API processes); SIP; a worker's /metrics. RTP is
# CALLPLANE_RTP_PORT_MIN..MAX over UDP: publish the range the workers are given (deploy/compose.yaml).
EXPOSE 3000 5060/udp 5060/tcp 9464
# /healthz on the API port, or on the metrics port of a worker (which has no HTTP server).
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "const e=process.env;Promise.any([e.PORT,e.CALLPLANE_METRICS_PORT].filter(Boolean).map((p)=>fetch('http://127.0.0.1:'+p+'/healthz').then((r)=>{if(!r.ok)throw new Error(String(r.status))}))).then(()=>process.exit(0),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--enable-source-maps", "--max-semi-space-size=4", "/app/dist/main.js"]
CMD ["serve", "--role", "all"]
